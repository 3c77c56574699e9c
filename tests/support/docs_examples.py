"""The documentation's examples, executed: a page's shell sessions run in order, in a
directory of their own, against loopback stand-ins, the way doctests run a docstring.

What a page may hold, parsed by Sybil (its MyST lexers):

- a ``console`` block: lines starting with ``$ `` are commands, run by bash in the page's
  working directory (``cd`` and ``export`` carry over to the next command, as in a
  terminal); the lines after a command, up to the next one, are its expected output
  (stdout and stderr together, as a terminal shows them), compared as doctest compares
  (``...`` stands for any text, runs of whitespace are one). A command with no lines after it
  must only succeed. A command that must fail says so as a shell comment the reader can
  paste: ``$ evalreg check   # exits 2``;
- a ``{code-block}`` with a ``:caption:`` that is a path (``registry/models/local.yaml``):
  the file is written there, relative to the working directory, before the next command;
- ``<!-- skip: next -->`` before a block that cannot run here (a cloud credential, an
  install from the package index), and ``<!-- invisible-code-block: console -->`` for a
  step the page does not show.

The models a page reaches are served by one stand-in (``tests/support/llm_server.py``)
speaking the OpenAI, Anthropic and Gemini protocols. A page names it as a local server
would be named, ``http://localhost:8000``; files are written with that origin replaced by
the stand-in's, on a free port. It answers a routing question (``{"intent": ...}``) by
keyword, each model name with its own accuracy, so results differ between candidates as
they would.
"""

from __future__ import annotations

import doctest
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sybil import Document, Example, Region, Sybil
from sybil.parsers.markdown.lexers import DirectiveInHTMLCommentLexer, FencedCodeBlockLexer
from sybil.parsers.myst import SkipParser
from sybil.parsers.myst.lexers import DirectiveLexer

LOCAL_ORIGIN = "http://localhost:8000"
"""How the pages name the model server they reach (a vLLM or Ollama server's address)."""

SHELL_LANGUAGES = {"sh", "bash", "shell", "shell-session", "zsh"}
"""Fences that would be shell examples the tests do not run: pages that are executed use
``console`` instead (or mark the block with ``<!-- skip: next -->``)."""

EXIT_COMMENT = re.compile(r"\s+#\s*exits?\s+(\d+)\s*$")
CHECKER = doctest.OutputChecker()
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@dataclass
class Session:
    """A page's terminal: its working directory and environment, carried between commands."""

    cwd: Path
    env: dict[str, str]
    origin: str
    """The stand-in's ``http://127.0.0.1:PORT``, written where a page says ``LOCAL_ORIGIN``."""
    state: Path
    """Where each command leaves its last directory and environment (``.pwd``, ``.env``):
    outside the page's working directory, which its commands list and commit."""
    timeout: float = 300
    log: list[str] = field(default_factory=list)

    def run(self, command: str) -> tuple[int, str]:
        """Run one command line as bash would, keeping ``cd`` and ``export``."""
        state = self.state
        script = (
            f"{command}\n__status=$?\n"
            f"pwd > {shlex.quote(str(state))}.pwd\n"
            f"env -0 > {shlex.quote(str(state))}.env\n"
            "exit $__status\n"
        )
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=self.timeout,
        )
        pwd = Path(f"{state}.pwd")
        if pwd.exists():
            self.cwd = Path(pwd.read_text().strip())
            pairs = Path(f"{state}.env").read_text().split("\0")
            self.env = dict(pair.split("=", 1) for pair in pairs if "=" in pair)
        self.log.append(f"$ {command}\n{done.stdout}")
        return done.returncode, done.stdout


@dataclass(frozen=True)
class Command:
    line: str
    expected: str | None
    status: int
    offset: int
    """Lines from the block's first line to the command's."""


def commands(source: str) -> Iterator[Command]:
    """A console block's commands with the output each expects."""
    current: tuple[str, int, int] | None = None
    output: list[str] = []
    lines = source.splitlines()
    for index, line in enumerate([*lines, "$ "]):
        if line.startswith("$ ") or index == len(lines):
            if current is not None:
                text, status, offset = current
                expected = "\n".join(output).strip("\n")
                yield Command(text, expected + "\n" if expected else None, status, offset)
            command = line[2:]
            match = EXIT_COMMENT.search(command)
            status = int(match.group(1)) if match else 0
            current = (command, status, index) if command.strip() else None
            output = []
        elif current is not None:
            output.append(line)


class ConsoleParser:
    """``console`` blocks, shown or in an HTML comment, each command run and checked."""

    def __init__(self) -> None:
        self.lexers = [
            FencedCodeBlockLexer(
                language=r".+", mapping={"language": "arguments", "source": "source"}
            ),
            DirectiveInHTMLCommentLexer(directive=r"invisible-code-block", arguments=".+"),
        ]

    def __call__(self, document: Document) -> Iterator[Region]:
        for lexer in self.lexers:
            for region in lexer(document):
                if region.lexemes["arguments"].strip() == "console":
                    region.parsed = str(region.lexemes["source"])
                    region.evaluator = self.evaluate
                    yield region

    @staticmethod
    def evaluate(example: Example) -> str | None:
        session: Session = example.namespace["session"]
        for command in commands(example.parsed):
            status, output = session.run(command.line)
            where = f"line {example.line + 1 + command.offset}"
            if status != command.status:
                return f"{where}: `{command.line}` exited {status}, not {command.status}:\n{output}"
            if command.expected is not None and not CHECKER.check_output(
                command.expected, output, FLAGS
            ):
                return (
                    f"{where}: `{command.line}` printed\n{output}\ninstead of\n{command.expected}"
                )
        return None


class FileParser:
    """``{code-block}`` directives whose caption is a path: the file is written there."""

    def __init__(self) -> None:
        self.lexer = DirectiveLexer(directive=r"code-block", arguments=".+")

    def __call__(self, document: Document) -> Iterator[Region]:
        for region in self.lexer(document):
            caption = (region.lexemes.get("options") or {}).get("caption", "")
            if caption and " " not in caption.strip():
                region.parsed = (caption.strip(), str(region.lexemes["source"]))
                region.evaluator = self.evaluate
                yield region

    @staticmethod
    def evaluate(example: Example) -> str | None:
        session: Session = example.namespace["session"]
        path, text = example.parsed
        target = session.cwd / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text.replace(LOCAL_ORIGIN, session.origin))
        return None


DOCS = Sybil(parsers=[ConsoleParser(), FileParser(), SkipParser()], patterns=["*.md"])


def examples(page: Path) -> Document:
    """The page's examples, in page order."""
    return DOCS.parse(page)


def unexecuted_shell_blocks(page: Path) -> list[int]:
    """Lines of fences in a shell language other than ``console``: examples nobody runs."""
    lines = []
    fence = re.compile(r"^\s*(```+|~~~+)\s*\{?([\w-]+)\}?\s*(\S*)")
    for number, line in enumerate(page.read_text().splitlines(), 1):
        match = fence.match(line)
        if match is None:
            continue
        language = match.group(3) if match.group(2) in {"code-block", "code"} else match.group(2)
        if language in SHELL_LANGUAGES:
            lines.append(number)
    return lines


def skipped(page: Path) -> list[str]:
    """Each ``skip`` mark of the page with its reason, as the page gives it."""
    return re.findall(r"<!--\s*skip:\s*(next[^>]*?)\s*-->", page.read_text())


def session_environment(base: dict[str, str], home: Path) -> dict[str, str]:
    """What a reader's terminal has that matters here, and nothing of the suite's own:
    ``PATH`` starts with this Python's scripts, where ``evalreg`` is installed."""
    keep = ("LANG", "LC_ALL", "TMPDIR", "VIRTUAL_ENV", "SYSTEMROOT")
    env = {name: base[name] for name in keep if name in base}
    env.update(
        PATH=os.pathsep.join([str(Path(sys.executable).parent), base.get("PATH", "")]),
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="Ada Lovelace",
        GIT_AUTHOR_EMAIL="ada@example.com",
        GIT_COMMITTER_NAME="Ada Lovelace",
        GIT_COMMITTER_EMAIL="ada@example.com",
        DVC_NO_ANALYTICS="1",
        COLUMNS="100",
        NO_COLOR="1",
    )
    return env


def prepare_home(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").write_text(
        "[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n"
    )
