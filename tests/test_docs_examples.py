"""Every shell example of the tutorial and the guides runs, in page order, and prints what
the page says it prints (``support/docs_examples.py`` says how a page is read)."""

from __future__ import annotations

import os
import re
import unittest
from pathlib import Path

import pytest

from support.docs_examples import (
    Session,
    examples,
    prepare_home,
    session_environment,
    skipped,
    unexecuted_shell_blocks,
)
from support.docs_models import ANSWERS, MODELS, SERVICES, TOOL_CALLS, routing
from support.llm_server import LLMServer, Request

DOCS = Path(__file__).resolve().parent.parent / "docs"
EXECUTED = [
    DOCS / "getting-started.md",
    *sorted((DOCS / "concepts").glob("*.md")),
    *sorted((DOCS / "guides").glob("*.md")),
]
"""The pages whose shell examples are run: the tutorial, the concepts and the guides."""

MOST_SKIPS = 3
"""Examples that cannot run here (a cloud account, an install from the package index), all
pages together: each is marked ``<!-- skip: next "why" -->`` on its page."""


def answer(request: Request) -> str:
    """The stand-in's answer: the model's own (``support/docs_models*.py``), else a routing
    answer (``docs_models.routing``)."""
    model = str((request.body or {}).get("model", ""))
    return ANSWERS.get(model, routing)(request)


def tool_calls(request: Request) -> list[dict[str, object]]:
    model = str((request.body or {}).get("model", ""))
    respond = TOOL_CALLS.get(model)
    return respond(request) if respond else []


def _page_id(page: Path) -> str:
    return str(page.relative_to(DOCS))


@pytest.mark.docs
@pytest.mark.parametrize("page", EXECUTED, ids=_page_id)
def test_the_pages_examples_run_as_shown(page: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    work = tmp_path / "work"
    prepare_home(home)
    work.mkdir()
    with LLMServer(responder=answer) as server:
        server.tool_caller = tool_calls
        server.services.update(SERVICES)
        server.models = list(MODELS)
        env = session_environment(dict(os.environ), home)
        session = Session(cwd=work, env=env, origin=server.root_url, state=tmp_path / "shell-state")
        document = examples(page)
        document.namespace["session"] = session
        ran = 0
        for example in document:
            try:
                example.evaluate()
            except unittest.SkipTest:
                continue
            ran += 1
    if os.environ.get("EVALREG_DOCS_TRANSCRIPT"):  # what each command printed, to write a page
        Path(os.environ["EVALREG_DOCS_TRANSCRIPT"], page.stem + ".txt").write_text(
            "".join(session.log)
        )
    assert ran or not list(examples(page)), f"{page}: no example ran"


@pytest.mark.parametrize("page", EXECUTED, ids=_page_id)
def test_the_pages_shell_examples_are_all_executed(page: Path) -> None:
    lines = unexecuted_shell_blocks(page)
    assert not lines, (
        f"{page}: shell blocks at lines {lines} would not be run by the tests: write them as "
        "`console` blocks (`$ command`, then its output), or mark what cannot run here with "
        '<!-- skip: next "why" -->'
    )


def test_skips_are_few_and_say_why() -> None:
    marks = {page: skipped(page) for page in EXECUTED}
    reasons = [mark for found in marks.values() for mark in found]
    assert len(reasons) <= MOST_SKIPS, marks
    for page, found in marks.items():
        for mark in found:
            assert re.fullmatch(r'next\s+"[^"]{10,}"', mark), (
                f"{page}: skip without a reason: {mark}"
            )
