"""DVC's lock after a killed run, or while another process holds it: the next command
clears what a process that has ended left, waits for one that is alive, and otherwise
ends with a message naming the holder, never with DVC's ``LockError``.

The closing step is killed at moments observed from outside (the journal's phase, DVC's
lock table naming the DVC child at work), with the processes the kill orphans reaped late,
as a container whose first process reaps slowly, or never, leaves them.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from evalreg import dvclock, dvcrepo
from evalreg.store.lock import state_dir

from conftest import Repo, registry_template, replace_tree
from support import runs
from support.llm_server import LLMServer

ITEMS = 8
EVALSET = "evalsets/messages.jsonl"
PR_SET_CHILD_SUBREAPER = 36


@pytest.fixture
def server(server_port: int) -> Iterator[LLMServer]:
    with LLMServer(api_key=runs.KEY, responder=runs.label_of, port=server_port) as srv:
        yield srv


@pytest.fixture(scope="module")
def registry_on_dvc(tmp_path_factory: pytest.TempPathFactory, server_port: int) -> Path:
    with LLMServer(api_key=runs.KEY, port=server_port) as srv:
        return registry_template(
            tmp_path_factory, lambda r: runs.live_registry(r, srv, items=ITEMS)
        )


@pytest.fixture
def registry(repo: Repo, server: LLMServer, registry_on_dvc: Path) -> Repo:
    return replace_tree(repo, registry_on_dvc)


def _group(pgid: int) -> list[int]:
    """The processes (zombies included) of process group ``pgid``."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rpartition(")")[2].split()
            if int(fields[2]) == pgid:
                members.append(int(stat.parent.name))
    return members


@pytest.fixture
def late_reaper() -> Iterator[Callable[[int], None]]:
    """This process adopts the processes a kill orphans, and reaps them only when the
    test ends: until then each is a zombie whose pid still exists. Yields a function that
    marks a process group's members as this test's to reap."""
    if sys.platform != "linux":
        pytest.skip("a child subreaper is Linux's")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        pytest.skip("cannot become a child subreaper here")
    adopted: list[int] = []
    try:
        yield lambda pgid: adopted.extend(_group(pgid))
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        for pid in adopted:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def _rwlock(repo: Repo) -> str:
    try:
        return (repo.root / ".dvc" / "tmp" / "rwlock").read_text()
    except OSError:
        return ""


def _hardlink_lock(repo: Repo) -> None:
    """``dvc config core.hardlink_lock true`` in ``repo``."""
    config = [sys.executable, "-m", "dvc", "config", "core.hardlink_lock", "true"]
    assert subprocess.run(config, cwd=repo.root, check=False).returncode == 0


def _dvc_adding(repo: Repo) -> bool:
    """The closing step's ``dvc add`` is under way: DVC's lock table records the DVC child
    writing a path (the moment a kill leaves the most of DVC's locks behind)."""
    return runs.journal_phase(repo) == "commit" and '"write"' in _rwlock(repo)


@pytest.mark.parametrize(("then", "hardlink"), [("run", False), ("check", False), ("status", True)])
def test_the_command_after_a_kill_in_the_closing_step_finishes_it_despite_dvcs_lock(
    registry: Repo,
    server: LLMServer,
    late_reaper: Callable[[int], None],
    then: str,
    hardlink: bool,
):
    if hardlink:
        _hardlink_lock(registry)
        registry.commit("DVC's hardlink lock")
        for name in ("lock", "rwlock.lock"):  # as in a repository never used without it
            (registry.root / ".dvc" / "tmp" / name).unlink()
    run = runs.start(registry, "run")
    assert runs.wait_until(run, lambda: _dvc_adding(registry)), run.communicate()[1]
    os.killpg(run.pid, signal.SIGKILL)
    late_reaper(run.pid)
    run.communicate(timeout=60)
    assert runs.journal_phase(registry) == "commit"

    after = runs.evalreg(registry, then)
    assert "Traceback" not in after.stderr, after.stderr
    assert after.returncode in (0, 1), after.stderr  # check: 1 for the push still owed
    assert "finished an interrupted run's closing step" in after.stderr
    assert runs.journal_phase(registry) is None
    assert runs.untracked_data(registry) == []
    assert not (state_dir(registry.root) / "journal.json").exists()


# ---------------------------------------------------------------- a live holder
HOLDER = """
import sys, zc.lockfile
lock = zc.lockfile.LockFile(sys.argv[1])
print("held", flush=True)
sys.stdin.readline()
lock.close()
print("released", flush=True)
sys.stdin.readline()
"""
"""Takes DVC's lock as DVC does, holds it until told, then lives on without it."""


@pytest.fixture
def on_dvc(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> Repo:
    """The registry with DVC initialised and its eval set out of git, to be tracked. DVC,
    in this process, tries its lock for a tenth of its three seconds (its own retries are
    not what is tested)."""
    import dvc.lock

    monkeypatch.setattr(dvc.lock, "DEFAULT_TIMEOUT", 0.3)
    dvcrepo.init(repo.root, remote=None)
    repo.git("rm", "-q", "--cached", EVALSET)
    repo.git("add", ".dvc", ".dvcignore")
    repo.git("commit", "-q", "-m", "DVC")
    return repo


@pytest.fixture
def holder(on_dvc: Repo) -> Iterator[subprocess.Popen[str]]:
    """A live process holding DVC's lock on ``on_dvc`` until a line is sent to it."""
    lock = on_dvc.root / ".dvc" / "tmp" / "lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    yield proc
    proc.kill()
    proc.wait()


def _release(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("release\n")
    proc.stdin.flush()
    assert proc.stdout.readline() == "released\n"


def test_a_command_waits_for_a_live_holder_of_dvcs_lock_then_succeeds(
    on_dvc: Repo, holder: subprocess.Popen[str], cli, monkeypatch: pytest.MonkeyPatch
):
    waits: list[list[dvclock.DvcLockHolder]] = []

    def pause(seconds: float) -> None:  # the command waits: now the holder lets go
        waits.append(dvclock.lock_holders(on_dvc.root, hardlink=False)[0])
        _release(holder)

    monkeypatch.setattr(dvclock, "pause", pause)
    done = cli(on_dvc, "evalset", "add", EVALSET, "--no-push")
    assert done.code == 0, done.err
    assert [[h.pid for h in held] for held in waits] == [[holder.pid]]
    assert (on_dvc.root / f"{EVALSET}.dvc").is_file()


def test_a_holder_of_dvcs_lock_beyond_the_wait_is_named_without_a_traceback(
    on_dvc: Repo, holder: subprocess.Popen[str], cli, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("EVALREG_DVC_LOCK_WAIT", "0")  # the bound is past at DVC's first try
    done = cli(on_dvc, "evalset", "add", EVALSET, "--no-push")
    assert done.code == 2
    assert "Traceback" not in done.err and "LockError" not in done.err
    assert f"pid {holder.pid} (`{sys.executable} -c" in done.err
    assert "Wait for that process to finish, or stop it" in done.err
    assert not (on_dvc.root / f"{EVALSET}.dvc").exists()


def test_dvcs_lock_table_records_of_a_process_that_has_ended_are_cleared(on_dvc: Repo, cli):
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    with contextlib.suppress(ChildProcessError):
        os.waitid(os.P_PID, ended.pid, os.WEXITED | os.WNOWAIT)  # a zombie, not reaped
    table = {"write": {str(on_dvc.root / EVALSET): {"pid": ended.pid, "cmd": "dvc add"}}}
    rwlock = on_dvc.root / ".dvc" / "tmp" / "rwlock"
    rwlock.parent.mkdir(parents=True, exist_ok=True)
    rwlock.write_text(json.dumps(table))
    try:
        done = cli(on_dvc, "evalset", "add", EVALSET, "--no-push")
    finally:
        ended.wait()
    assert done.code == 0, done.err
    assert str(ended.pid) not in rwlock.read_text()


def test_a_hardlink_lock_nothing_names_is_left_in_place_with_what_to_do(on_dvc: Repo, cli):
    _hardlink_lock(on_dvc)
    tmp = on_dvc.root / ".dvc" / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    claim = tmp / "0123456789abcdef0123456789abcdef.lock"
    claim.write_text(str(claim))
    os.link(claim, tmp / "lock")  # as DVC's hardlink lock is held, by a process unknown
    done = cli(on_dvc, "evalset", "add", EVALSET, "--no-push")
    assert done.code == 2
    assert "Traceback" not in done.err
    assert "If no DVC process is running in this repository" in done.err
    assert "remove .dvc/tmp/lock" in done.err
    assert (tmp / "lock").exists()  # not ours to remove


def test_the_files_dvcs_default_lock_left_do_not_refuse_its_hardlink_lock(on_dvc: Repo, cli):
    on_dvc.write("data/earlier.txt", "tracked before\n")
    dvcrepo.track(on_dvc.root, ["data/earlier.txt"], push=False)  # with DVC's default lock
    assert (on_dvc.root / ".dvc" / "tmp" / "lock").is_file()  # which leaves its file
    _hardlink_lock(on_dvc)
    added = cli(on_dvc, "evalset", "add", EVALSET, "--no-push")
    assert added.code == 0, added.err
    assert (on_dvc.root / f"{EVALSET}.dvc").is_file()


def test_gits_index_lock_left_by_a_killed_process_is_named_not_removed(on_dvc: Repo, cli):
    stale = on_dvc.root / ".git" / "index.lock"
    stale.write_bytes(b"")
    done = cli(on_dvc, "evalset", "add", EVALSET, "--no-push")
    assert done.code == 2
    assert "Traceback" not in done.err and "FileLocked" not in done.err
    assert "git's index is locked (.git/index.lock)" in done.err
    assert "If no git command is running, remove the file" in done.err
    assert stale.exists()
    stale.unlink()
    again = cli(on_dvc, "evalset", "add", EVALSET, "--no-push")
    assert again.code == 0, again.err
    assert (on_dvc.root / f"{EVALSET}.dvc").is_file()
