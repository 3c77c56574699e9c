"""Real ``evalreg`` processes against a registry on DVC and a loopback model server:
start them in their own process group, signal the whole group at a chosen moment, and
check what they leave behind.

Moments are observed from outside, as a user's terminal or a CI runner would see them:
the server's request count, files appearing, the run journal's phase. Nothing in the
program under test knows it is being watched.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from evalreg import dvcrepo
from evalreg.compare.drift_log import DRIFT_LOG
from evalreg.store.lock import state_dir
from evalreg.store.purge_log import PURGE_LOG
from evalreg.store.rebought_log import REBOUGHT_LOG
from evalreg.store.segments import STORE_DIR, ResponseStore, request_key

from conftest import PIN_OPENAI, Repo, items_jsonl
from support.llm_server import LLMServer, Request

KEY = "sk-test-crash-safety-7f3a"
EVALSET = "evalsets/messages.jsonl"


def label_of(request: object) -> str:
    text = request.body["messages"][-1]["content"]  # type: ignore[attr-defined]
    return json.dumps({"label": "a" if text.endswith(("1", "3", "5", "7", "9")) else "b"})


def live_registry(repo: Repo, server: LLMServer, *, items: int, pins: int = 2) -> Repo:
    """The conftest registry with ``items`` items and ``pins`` OpenAI pins at ``server``,
    on DVC with the in-repository remote, committed."""
    selection = repo.read("registry/selections/labels.yaml")
    extra = ""
    for n in range(2, pins + 1):
        pin = PIN_OPENAI.replace("https://api.openai.com/v1", server.base_url).replace(
            "gpt-4o-mini-2024-07-18", f"gpt-test-{n}"
        )
        repo.write(f"registry/models/mini{n}.yaml", pin)
        extra += f"  - id: mini{n}\n    pin: mini{n}\n"
    # Only HTTP candidates: every response the run stores is one the server counted.
    repo.write(
        "registry/selections/labels.yaml",
        selection.replace(
            "  - id: rules\n    pin: rules\n  - id: mini\n    pin: mini\n",
            "  - id: mini\n    pin: mini\n" + extra,
        ).replace("selected: rules", "selected: mini"),
    )
    repo.git("rm", "-q", "registry/models/rules.yaml", "registry/systems/rules.py")
    repo.write(
        "registry/models/mini.yaml",
        PIN_OPENAI.replace("https://api.openai.com/v1", server.base_url).replace(
            "OPENAI_API_KEY", "CRASH_TEST_KEY"
        ),
    )
    for n in range(2, pins + 1):
        path = f"registry/models/mini{n}.yaml"
        repo.write(path, repo.read(path).replace("OPENAI_API_KEY", "CRASH_TEST_KEY"))
    repo.write(EVALSET, items_jsonl(items))
    repo.git("rm", "-q", "--cached", EVALSET)
    dvcrepo.init(repo.root, remote=None)
    dvcrepo.add_and_push(repo.root, EVALSET, push=True)
    repo.commit("registry on DVC, pins at the test server")
    return repo


def env() -> dict[str, str]:
    return {**os.environ, "CRASH_TEST_KEY": KEY, "COLUMNS": "200"}


def _as_from_a_terminal() -> None:
    # A program started in the background by a shell without job control inherits SIGINT
    # ignored, and so would every test run of a suite started that way: the program under
    # test gets Ctrl-C's default, as it has when a user starts it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(repo: Repo, *args: str) -> subprocess.Popen[str]:
    """``evalreg -C repo ARGS`` as a real process, leader of its own process group."""
    return subprocess.Popen(
        [sys.executable, "-m", "evalreg", "-C", str(repo.root), *args],
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_as_from_a_terminal,
    )


def evalreg(
    repo: Repo, *args: str, timeout: float = 300, max_file_bytes: int | None = None
) -> subprocess.CompletedProcess[str]:
    """``evalreg -C repo ARGS`` to its end; ``max_file_bytes`` is ``ulimit -f`` for it."""

    def limit() -> None:
        if max_file_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))

    return subprocess.run(
        [sys.executable, "-m", "evalreg", "-C", str(repo.root), *args],
        env=env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=limit,
    )


def in_process(repo: Repo, *args: str) -> subprocess.CompletedProcess[str]:
    """``evalreg -C repo ARGS`` run in this process, in ``env()``: for a command whose being
    a process of its own is not what a test is about (what it reads after the processes it
    signalled have ended, a status, a check, a reproduction; the runs that set a scene). It
    is spared starting Python and importing evalreg again."""
    import io
    from unittest import mock

    from evalreg.cli import main

    out, err = io.StringIO(), io.StringIO()
    with (
        mock.patch.dict(os.environ, env()),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        code = main(["-C", str(repo.root), *args])
    return subprocess.CompletedProcess(["evalreg", *args], code, out.getvalue(), err.getvalue())


def request_key_of(request: Request, server: LLMServer) -> str:
    """The store key of a request the server received (every task here has one sample)."""
    return request_key("openai", f"{server.base_url}/chat/completions", request.raw, 0)


def journal_phase(repo: Repo) -> str | None:
    try:
        return str(json.loads((state_dir(repo.root) / "journal.json").read_bytes())["phase"])
    except (OSError, ValueError, KeyError):
        return None


def pointers(repo: Repo) -> set[str]:
    return {str(p.relative_to(repo.root)) for p in repo.root.rglob("reports/**/*.dvc")}


@dataclass(frozen=True)
class Moment:
    """When to signal, and what keeps the run from ending before the signal lands.

    ``held_after``: the server answers that many requests and holds every later one until
    the signal has been sent; ``reached`` comes true while they wait. ``closing``: the
    moment falls in the closing step, which the DVC child does and the run waits for: the
    run and the child are stopped as soon as the child exists and let run in turn, a
    slice at a time, until ``reached`` holds; then the child for ``after`` seconds more.
    Otherwise: the first instant ``reached`` holds,
    plus ``after`` seconds."""

    name: str
    reached: Callable[[Repo, LLMServer, set[str]], bool]
    after: float = 0.0
    held_after: int | None = None
    closing: bool = False


def _closing(repo: Repo, srv: LLMServer, before: set[str]) -> bool:
    return journal_phase(repo) == "commit"


MOMENTS = [
    Moment("mid-fetch", lambda repo, srv, before: srv.count() > 40, held_after=40),
    Moment("fetch done", lambda repo, srv, before: srv.count() >= 120, held_after=119),
    Moment("closing step begins", _closing, closing=True),
    Moment("closing step +5 ms", _closing, after=0.005, closing=True),
    Moment(
        "first pointer written",
        lambda repo, srv, before: bool(pointers(repo) - before),
        closing=True,
    ),
    Moment(
        "journal closed (pushing)",
        lambda repo, srv, before: bool(pointers(repo) - before) and journal_phase(repo) is None,
        closing=True,
    ),
]


def wait_until(proc: subprocess.Popen[str], reached: Callable[[], bool]) -> bool:
    """Whether ``reached`` came true while ``proc`` still ran (looked at every half
    millisecond, for up to two minutes)."""
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if reached():
            return True
        time.sleep(0.0005)
    return False


@contextlib.contextmanager
def holding(server: LLMServer, after: int) -> Iterator[None]:
    """The server answers ``after`` requests, then holds the next one, and with it every
    later one, until the block ends: a run caught mid-fetch for as long as a test needs
    (the moment it is caught is ``server.count() > after``)."""
    with server.hold(after=after - server.count()):
        yield


DVC_CHILD = "evalreg.runner._dvcworker"


def _state(pid: int) -> str | None:
    """``pid``'s state letter (``T`` stopped, ``Z`` ended), None once it is gone."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return None


def dvc_child(pgid: int) -> int | None:
    """The pid of the run's DVC child (``runner._dvcworker``) in process group ``pgid``."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if DVC_CHILD.encode() in cmdline.read_bytes():
                pid = int(cmdline.parent.name)
                if os.getpgid(pid) == pgid:
                    return pid
    return None


def _stop(pid: int) -> bool:
    """SIGSTOP ``pid`` and wait until it is stopped; False if it has ended."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 60
    while (state := _state(pid)) not in ("T", "t"):
        if state in (None, "Z", "X"):
            return False
        assert time.monotonic() < deadline, f"process {pid} is not stopping ({state})"
        time.sleep(0.0005)
    return True


def _run_for(pid: int, seconds: float) -> bool:
    """Let the stopped ``pid`` run for ``seconds``, then stop it again; False if it has
    ended meanwhile."""
    os.kill(pid, signal.SIGCONT)
    time.sleep(seconds)
    return _stop(pid)


def _go_on(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGCONT)


def _stepped(
    repo: Repo, proc: subprocess.Popen[str], moment: Moment, reached: Callable[[], bool]
) -> bool:
    """Stop the run and its DVC child as soon as the child exists, then let them run in
    turn, a few milliseconds at a time, looking for the moment while both are stopped;
    then let the child run ``moment.after`` seconds more. The run waits for the child's
    replies and for its end, and the child for the run's requests, so neither can end
    unseen: the run is still running when the signal lands. Returns whether the moment
    was reached (both are left stopped: ``signal_at`` lets them go once the signal has
    been sent)."""
    deadline = time.monotonic() + 120
    child = None
    while child is None:
        assert proc.poll() is None, "the run ended before its DVC child was seen"
        assert time.monotonic() < deadline, "no DVC child"
        child = dvc_child(proc.pid)
    assert _stop(child), "the DVC child ended before the moment"
    _stop(proc.pid)
    turn = [proc.pid, child]
    while not reached():
        assert time.monotonic() < deadline, f"{moment.name} not reached"
        if not _run_for(turn[0], 0.005):
            # Without a push the child ends once the run has no more to ask it (its input
            # closed, just before the journal is): the run goes on alone, in short slices.
            assert turn[0] == child, "the run ended before the moment"
            turn = [proc.pid]
            while not reached() and _run_for(proc.pid, 0.0005):
                pass
            break
        turn.reverse()
    if moment.after:
        _run_for(child, moment.after)
    return proc.poll() is None


def signal_at(
    repo: Repo, server: LLMServer, moment: Moment, signum: int, *args: str
) -> tuple[str, int | None]:
    """Start ``evalreg run ARGS``, signal its process group at ``moment``; return what it
    printed on stderr and its exit status (None if it had ended before the moment)."""
    before = pointers(repo)
    with contextlib.ExitStack() as held:
        if moment.held_after is not None:
            held.enter_context(server.hold(after=moment.held_after))
        proc = start(repo, "run", *args)
        held.callback(_go_on, proc.pid)  # after the signal, in any case

        def reached() -> bool:
            return moment.reached(repo, server, before)

        if moment.closing:
            hit = _stepped(repo, proc, moment, reached)
        else:
            hit = wait_until(proc, reached)
            if hit and moment.after:
                time.sleep(moment.after)
        if hit:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signum)
    _, err = proc.communicate(timeout=120)
    # The group's other members (the DVC child) are gone too before anything is checked.
    wait_group_gone(proc.pid)
    return err, proc.returncode if hit else None


def group_members(pgid: int) -> list[int]:
    """The processes of group ``pgid`` that have not ended. One that has ended and waits to
    be reaped (a zombie: its locks and files already released, as a kill's orphans wait for
    whichever process adopts them) is not counted, as evalreg does not count it."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rpartition(")")[2].split()
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                members.append(int(stat.parent.name))
    return members


def wait_group_gone(pgid: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not group_members(pgid):
            return
        time.sleep(0.005)
    os.killpg(pgid, signal.SIGKILL)


def stored_keys(repo: Repo) -> set[str]:
    return set(ResponseStore.open(repo.root).keys())


def stored_records(repo: Repo) -> list[dict]:
    """Every record of the store's segments on disk, segment after segment, as written."""
    records = []
    for segment in sorted((repo.root / STORE_DIR).glob("*.jsonl")):
        records += [json.loads(line) for line in segment.read_text().splitlines()]
    return records


def raw_in_git(repo: Repo) -> list[str]:
    """Store segments or items files committed as raw data rather than as DVC pointers."""
    return [
        f
        for f in repo.git("ls-files", "reports").splitlines()
        if f.endswith(".jsonl") or f.endswith(".tmp")
    ]


GIT_LOGS = {DRIFT_LOG, PURGE_LOG, REBOUGHT_LOG}
"""The logs under ``reports/`` that git keeps, not DVC."""


def untracked_data(repo: Repo) -> list[str]:
    """Data files in the working tree without a DVC pointer beside them."""
    out = []
    for path in (repo.root / "reports").rglob("*"):
        rel = str(path.relative_to(repo.root))
        data = (rel.endswith(".jsonl") and rel not in GIT_LOGS) or rel.endswith(".tmp")
        if path.is_file() and data and not Path(str(path) + ".dvc").is_file():
            out.append(rel)
    return sorted(out)


def unpushed_md5s(repo: Repo) -> list[str]:
    """md5s of tracked data under reports/ that the in-repository remote lacks."""
    remote = repo.root / dvcrepo.IN_REPO_REMOTE / "files" / "md5"
    missing = []
    for rel in sorted(pointers(repo)):
        md5 = dvcrepo.pointer_md5((repo.root / rel).read_bytes())
        assert md5 is not None, rel
        if not (remote / md5[:2] / md5[2:]).is_file():
            missing.append(f"{rel} ({md5})")
    return missing


__all__ = ["KEY", "MOMENTS", "STORE_DIR", "Moment", "signal_at"]


def everything_written(root: Path) -> list[tuple[str, bytes]]:
    """Every file below ``root`` (working tree, .git, DVC cache and remote) and every git
    object, loose or packed, decompressed."""
    files = [(str(p.relative_to(root)), p.read_bytes()) for p in root.rglob("*") if p.is_file()]
    objects = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=root,
        check=True,
        capture_output=True,
    ).stdout
    return [*files, ("git objects", objects)]
