"""``evalreg run --until-decided`` end to end: real git and DVC, the loopback model server,
an eval set of 2,000 items bought in rounds until the use case is decided."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from conftest import Repo
from support import runs
from support.llm_server import LLMServer, Request
from support.runs import evalreg, in_process, live_registry

ITEMS = 2000


def triage_well(request: Request) -> str:
    """Right on nine items in ten (message i's label is "a" for odd i), by the message."""
    text = request.body["messages"][-1]["content"]
    i = int(text.rsplit(" ", 1)[-1])
    right = "a" if i % 2 else "b"
    wrong = "b" if right == "a" else "a"
    return json.dumps({"label": wrong if i % 10 == 3 else right})


def _policy(repo: Repo, gate: float, sequential: str = "") -> None:
    """Two candidates: ``mini`` (the server) against ``mini2`` (the server, answering
    the same unless told otherwise); one pass-rate gate at ``gate``."""
    path = "registry/selections/labels.yaml"
    text = repo.read(path)
    start = text.index("policy:")
    end = text.index("selected:")
    repo.write(
        path,
        text[:start]
        + "policy:\n  gates:\n    - metric: pass_rate\n"
        + f"      min: {gate}\n"
        + "  objective:\n    lexicographic:\n      - maximize: pass_rate\n"
        + sequential
        + text[end:],
    )


@pytest.fixture
def server(server_port: int) -> Iterator[LLMServer]:
    with LLMServer(api_key=runs.KEY, port=server_port) as srv:
        yield srv


@pytest.fixture
def two_pins(repo: Repo, server: LLMServer) -> Repo:
    live_registry(repo, server, items=ITEMS, pins=2)
    return repo


def _summary(repo: Repo, candidate: str) -> dict:
    return json.loads(repo.read(f"reports/results/labels/{candidate}.json"))


def test_a_clear_cut_use_case_stops_early_and_reproduces(two_pins: Repo, server: LLMServer) -> None:
    repo = two_pins
    # mini triages well (90 %); mini2 always answers "a" (50 %): the gate at 0.7 is
    # clear-cut for both, and so is the ranking.
    server.responder = lambda request: (
        json.dumps({"label": "a"})
        if request.body["model"] == "gpt-test-2"
        else triage_well(request)
    )
    _policy(repo, 0.7, "  sequential:\n    min_items: 100\n    round: 100\n")
    repo.commit("policy: one gate, decided sequentially")
    done = evalreg(repo, "run", "--no-push", "--max-concurrency", "16")
    assert done.returncode == 0, (
        done.stderr + done.stdout + repr(server.errors[:2]) + str(len(server.requests))
    )
    bought = len(server.requests)
    assert bought < ITEMS, done.stdout  # two cells of 2,000 items, stopped well before
    for candidate in ("mini", "mini2"):
        stop = _summary(repo, candidate)["sequential"]
        assert stop["of"] == ITEMS and stop["items"] < ITEMS // 2, stop
    assert "decided after" in done.stdout
    status = in_process(repo, "status")
    assert "decided (" in status.stdout, status.stdout
    repo.commit("results, decided sequentially")
    # A second run buys nothing.
    again = evalreg(repo, "run", "--no-push", "--until-decided")
    assert again.returncode == 0, again.stderr
    assert len(server.requests) == bought
    reproduced = in_process(repo, "reproduce", "HEAD")
    assert reproduced.returncode == 0, reproduced.stdout + reproduced.stderr
