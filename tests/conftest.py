"""Shared fixtures: real registry repositories in temporary directories."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from evalreg import dvcrepo
from evalreg.cli import main
from evalreg.providers import http
from evalreg.runner import _dvcworker

from support.llm_server import LLMServer

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Committer",
    "GIT_COMMITTER_EMAIL": "committer@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def pytest_configure(config: pytest.Config) -> None:
    """Where the environment keeps Python from writing what it compiles
    (``PYTHONDONTWRITEBYTECODE``), every process of the suite would compile the same modules
    again. So pytest keeps the test modules it compiles (with their assertions rewritten,
    seconds of each xdist worker's start), and once, before any test (in xdist's controller,
    before its workers start), evalreg's modules are compiled for the hundreds of
    ``evalreg`` processes the suite starts. Nothing is written where they are not writable."""
    sys.dont_write_bytecode = False
    if hasattr(config, "workerinput"):
        return
    import compileall

    import evalreg

    compileall.compile_dir(Path(evalreg.__file__).parent, quiet=2)


FIRST = ("test_workflow_steps.py",)
"""Modules run before the others: the longest tests, sharing fixtures that take seconds to
build. Under ``-n``, xdist hands each worker its first tests in collection order, so these
run on one worker, their fixtures built once, and none is left to run last while the other
workers wait."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.path.name not in FIRST)  # stable: order kept within


@pytest.fixture(autouse=True)
def _git_identity(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("DVC_NO_ANALYTICS", "1")
    monkeypatch.setenv("COLUMNS", "200")  # tables on one line each, for readable assertions


class _ShortBackoff(http.Backoff):
    """Retries within a test wait milliseconds, not the half second and more a real API is
    given: what a test checks is how many attempts were made and what they sent."""

    def __init__(self, initial: float = 0.01, maximum: float = 0.05, jitter: float = 0.01):
        super().__init__(initial=initial, maximum=maximum, jitter=jitter)


@pytest.fixture(autouse=True)
def _short_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands run in the test's own process (``cli``) retry after milliseconds; one run
    as a separate process keeps the real backoff."""
    monkeypatch.setattr(http, "Backoff", _ShortBackoff)


def _no_dvc_child(root: Path, lock_fd: int | None) -> None:
    """``_dvcworker.start_child`` for commands run in the test's process: no child, so the
    run's ``Tracker`` tracks its files in this process."""
    return None


@pytest.fixture(autouse=True)
def _tracking_in_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands run in the test's own process (``cli``) track a run's files there, with the
    same ``dvcrepo.track`` the DVC child runs (``Tracker``'s fallback when no child can be
    started): the child imports DVC afresh, most of a second of CPU, on every run. Commands
    run as separate processes (``support.runs``, the workflow steps) keep their child, and a
    test about the child itself is marked ``dvc_child``."""
    if request.node.get_closest_marker("dvc_child") is None:
        monkeypatch.setattr(_dvcworker, "start_child", _no_dvc_child)


PIN_PYTHON = """\
schema_version: 1
description: Rules baseline.
provider: python
callable: registry/systems/rules.py:answer
price:
  per_call: 0.0
  as_of: 2026-01-01
"""

PIN_OPENAI = """\
schema_version: 1
provider: openai
model: gpt-4o-mini-2024-07-18
base_url: https://api.openai.com/v1
api_key_env: OPENAI_API_KEY
params:
  temperature: 0
price:
  input_per_mtok: 0.15
  output_per_mtok: 0.6
  as_of: 2026-01-01
"""

RUBRIC = """\
schema_version: 1
description: Right label, valid JSON.
version: "1"
criteria:
  - id: valid_json
    description: Output parses as JSON.
    critical: true
    grader:
      type: json_schema
  - id: label
    description: Label matches.
    critical: true
    grader:
      type: field_exact
      field: label
levels:
  correct: {require: all}
  acceptable: {require: [valid_json]}
"""

TASK = """\
schema_version: 1
description: Label a message.
evalset: evalsets/messages.jsonl
prompt:
  system: Answer with JSON.
  template: "Message: {{ text }}"
output:
  parser: json
  schema:
    type: object
    required: [label]
    properties:
      label: {type: string}
rubric: labels
repeats: 1
monthly_volume: 1000
failure_modes:
  - id: wrong_label
    description: Wrong queue.
    cost_usd: 2.5
    detected_by: [label]
"""

SELECTION = """\
schema_version: 1
use_case: Message labelling
task: labels
candidates:
  - id: rules
    pin: rules
  - id: mini
    pin: mini
policy:
  gates:
    - metric: pass_rate
      slice: common
      min: 0.5
  objective:
    lexicographic:
      - maximize: pass_rate
      - minimize: cost_per_item_usd
selected: rules
rationale: Baseline.
"""

SYSTEM = '''\
"""Rules baseline."""
import json


def answer(request):
    return json.dumps({"label": "a"})
'''


def items_jsonl(n: int = 4) -> str:
    rows = []
    for i in range(n):
        rows.append(
            {
                "id": f"m-{i:03d}",
                "input": {"text": f"message {i}"},
                "expected": {"label": "a" if i % 2 else "b"},
                "tags": ["common" if i % 2 else "edge"],
            }
        )
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)


class Repo:
    """A registry repository on disk, with helpers to edit it and to run the CLI in it."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, rel: str, content: str | bytes) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return path

    def read(self, rel: str) -> str:
        return (self.root / rel).read_text(encoding="utf-8")

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=self.root, check=True, capture_output=True, text=True
        ).stdout

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD").strip()

    def snapshot(self) -> dict[str, tuple[str, int]]:
        """Every file below the root (outside .git, and outside ``.dvc/tmp``: DVC's
        scratch, where any DVC call, a read included, leaves the pid of its lock's last
        holder) with its content hash and mtime."""
        out = {}
        for dirpath, _dirs, files in os.walk(self.root):
            parts = Path(dirpath).relative_to(self.root).parts
            if parts[:1] == (".git",) or parts[:2] == (".dvc", "tmp"):
                continue
            for name in files:
                path = Path(dirpath) / name
                # A symlink is its target (it may point nowhere, or at itself).
                content = (
                    f"-> {path.readlink()}".encode() if path.is_symlink() else path.read_bytes()
                )
                out[str(path.relative_to(self.root))] = (
                    hashlib.sha256(content).hexdigest(),
                    path.lstat().st_mtime_ns,
                )
        return out


def build_registry(r: Repo) -> None:
    """Write the standard registry into a new git repository at ``r.root`` (not committed)."""
    r.root.mkdir()
    r.git("init", "-q", "-b", "main")
    r.write("registry/models/rules.yaml", PIN_PYTHON)
    r.write("registry/models/mini.yaml", PIN_OPENAI)
    r.write("registry/rubrics/labels.yaml", RUBRIC)
    r.write("registry/tasks/labels.yaml", TASK)
    r.write("registry/selections/labels.yaml", SELECTION)
    r.write("registry/systems/rules.py", SYSTEM)
    r.write("evalsets/messages.jsonl", items_jsonl())


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    """A valid registry in a real git repository with one commit."""
    r = Repo(tmp_path / "repo")
    build_registry(r)
    r.commit("registry")
    return r


@pytest.fixture
def narrow(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The CLI's consoles 80 columns wide for this test (they are made once a process)."""
    from evalreg.report import terminal

    monkeypatch.setenv("COLUMNS", "80")
    terminal.console.cache_clear()
    terminal.error_console.cache_clear()
    yield
    terminal.console.cache_clear()
    terminal.error_console.cache_clear()


class Result:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Iterator[object]:
    """Run ``evalreg`` in-process: ``cli(repo, "check")`` returns code, stdout, stderr."""

    def run(repo: Repo | Path | None, *args: str) -> Result:
        argv = list(args)
        if repo is not None:
            root = repo.root if isinstance(repo, Repo) else repo
            argv = ["-C", str(root), *argv]
        code = main(argv)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    yield run


def assert_refused(repo: Repo, cli, *args: str, expect: tuple[str, ...] = ()) -> str:
    """Run ``evalreg ARGS``: it must exit 2 without a traceback, say each of ``expect``, and
    change no file (git's view of the tree included, in a git repository). Returns its
    stderr."""

    def state() -> tuple[dict[str, tuple[str, int]], str | None]:
        in_git = (repo.root / ".git").exists()
        return repo.snapshot(), repo.git("status", "--porcelain", "--ignored") if in_git else None

    before = state()
    result = cli(repo, *args)
    assert result.code == 2, result.err
    assert "Traceback" not in result.err
    for fragment in expect:
        assert fragment in result.err, f"{fragment!r} not in:\n{result.err}"
    assert state() == before
    return result.err


# ---------------------------------------------------------------- live registries
LIVE_KEY = "sk-test-runner-5d1c0a"
EVALSET = "evalsets/messages.jsonl"


def label_of(request) -> str:
    text = request.body["messages"][-1]["content"]
    return json.dumps({"label": "a" if text.endswith(("1", "3", "5")) else "b"})


def _free_port() -> int:
    """A loopback port below the system's ephemeral range (so no client socket or port-0
    server is given it while it is free between tests), free right now, and in this xdist
    worker's own share of the range (another worker's port is free between its tests too)."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    workers = max(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")), worker + 1)
    share = (32000 - 20000) // workers
    first = 20000 + worker * share
    for _ in range(200):
        port = random.randrange(first, first + share)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free loopback port between 20000 and 32000")


@pytest.fixture(scope="session")
def server_port() -> int:
    """The port every ``server`` of this session listens on: registries built once for the
    session (``live_template``) point their pins at it, and stay valid for every test."""
    return _free_port()


@pytest.fixture
def server(server_port: int):
    """A fresh loopback model server for this test (nothing recorded, no faults)."""
    with LLMServer(api_key=LIVE_KEY, responder=label_of, port=server_port) as srv:
        yield srv


@contextmanager
def session_environment(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[pytest.MonkeyPatch]:
    """The environment ``_git_identity`` and ``live`` give a test (and the in-process
    commands' tracking and backoff of ``_tracking_in_process`` and ``_short_backoff``), for
    building a template outside any test."""
    home = tmp_path_factory.mktemp("template-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_dvcworker, "start_child", _no_dvc_child)
        mp.setattr(http, "Backoff", _ShortBackoff)
        for key, value in GIT_ENV.items():
            mp.setenv(key, value)
        mp.setenv("HOME", str(home))
        mp.setenv("XDG_CONFIG_HOME", str(home / ".config"))
        mp.setenv("DVC_NO_ANALYTICS", "1")
        mp.setenv("COLUMNS", "200")
        mp.setenv("OPENAI_API_KEY", LIVE_KEY)
        yield mp


def replace_tree(repo: Repo, template: Path) -> Repo:
    """Make ``repo`` (same path) a copy of ``template``: its own, writable repository."""
    shutil.rmtree(repo.root)
    shutil.copytree(template, repo.root, symlinks=True)
    return repo


def _make_live(repo: Repo, base_url: str) -> None:
    repo.write(
        "registry/models/mini.yaml",
        repo.read("registry/models/mini.yaml").replace("https://api.openai.com/v1", base_url),
    )
    repo.git("rm", "-q", "--cached", EVALSET)
    dvcrepo.init(repo.root, remote=None)
    assert main(["-C", str(repo.root), "evalset", "add", str(repo.root / EVALSET)]) == 0
    repo.commit("registry on DVC, pin at the test server")


def registry_template(
    tmp_path_factory: pytest.TempPathFactory, build: Callable[[Repo], object]
) -> Path:
    """``repo``'s registry changed by ``build``, built outside any test for several tests to
    start from (``replace_tree``); copy it, never change it."""
    with session_environment(tmp_path_factory):
        r = Repo(tmp_path_factory.mktemp("template") / "repo")
        build_registry(r)
        r.commit("registry")
        build(r)
    return r.root


@pytest.fixture(scope="session")
def live_template(tmp_path_factory: pytest.TempPathFactory, server_port: int) -> Path:
    """``live``'s repository, built once (``dvc init`` and ``evalset add`` cost seconds)."""
    url = f"http://127.0.0.1:{server_port}/v1"
    return registry_template(tmp_path_factory, lambda r: _make_live(r, url))


def template_from_live(
    tmp_path_factory: pytest.TempPathFactory,
    live_template: Path,
    server_port: int,
    build: Callable[[Repo, LLMServer], None],
) -> Path:
    """A copy of ``live_template`` changed by ``build`` (given the repository and a server
    on the session's port): a module's shared starting point; copy it, never change it."""
    root = tmp_path_factory.mktemp("template") / "repo"
    shutil.copytree(live_template, root, symlinks=True)
    with (
        session_environment(tmp_path_factory),
        LLMServer(api_key=LIVE_KEY, responder=label_of, port=server_port) as srv,
    ):
        build(Repo(root), srv)
    return root


@pytest.fixture
def live(repo: Repo, server, monkeypatch, live_template: Path) -> Repo:
    """The standard registry on DVC, its OpenAI pin pointed at the loopback server: this
    test's own copy of ``live_template``, at ``repo``'s path."""
    monkeypatch.setenv("OPENAI_API_KEY", LIVE_KEY)
    assert server.base_url in (live_template / "registry/models/mini.yaml").read_text()
    return replace_tree(repo, live_template)
