"""A purge or compaction killed at any stage is finished by the next command, and ends as
an uninterrupted one does.

Real ``evalreg store purge`` / ``store compact`` processes, each the leader of its own
process group, are signalled at stages observed from outside (the rewrite journal's
phase, the new segment's file, the pointers), as a terminal, CI runner or container
engine would. Then an ordinary read-only command runs, and the repository is compared
with one where the same purge ran to its end: the same records in the store (the md5 of
every segment's contents), the same purge log (the new segment's random name aside), the
same ``reproduce`` report, everything tracked and pushed, no journal left.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from evalreg import dvcrepo
from evalreg.store.lock import state_dir
from evalreg.store.purge_log import PURGE_LOG
from evalreg.store.rewrite import REWRITE
from evalreg.store.segments import SEGMENT_SUFFIX, STORE_DIR

from conftest import Repo, items_jsonl, registry_template, replace_tree, session_environment
from support import runs
from support.llm_server import LLMServer
from support.matrix import SLOW, every_nth

ITEM = "m-003"
PURGE = ("store", "purge", ITEM, "--reason", "erasure request", "--date", "2026-12-01")


def _grow(repo: Repo, server: LLMServer) -> None:
    """Two runs, so two segments: 12 items, then 6 more (18 items x 2 pins)."""
    runs.live_registry(repo, server, items=12)
    assert runs.evalreg(repo, "run").returncode == 0
    repo.commit("results")
    repo.root.joinpath(runs.EVALSET).write_text(items_jsonl(18))
    dvcrepo.add_and_push(repo.root, runs.EVALSET, push=True)
    assert runs.evalreg(repo, "run").returncode == 0
    repo.commit("six more items")


@pytest.fixture(scope="module")
def grown(tmp_path_factory, server_port: int) -> Path:
    with LLMServer(api_key=runs.KEY, responder=runs.label_of, port=server_port) as srv:
        return registry_template(tmp_path_factory, lambda r: _grow(r, srv))


@pytest.fixture
def registry(repo: Repo, grown: Path) -> Repo:
    return replace_tree(repo, grown)


def rewrite_journal(repo: Repo) -> dict | None:
    try:
        return json.loads((state_dir(repo.root) / REWRITE).read_bytes())
    except (OSError, ValueError):
        return None


def segment_pointers(repo: Repo) -> set[str]:
    return {p.name for p in (repo.root / STORE_DIR).glob(f"*{SEGMENT_SUFFIX}.dvc")}


@dataclass(frozen=True)
class Stage:
    """When to signal: the first instant ``reached`` holds (``before``: the segment
    pointers there were at the start)."""

    name: str
    reached: Callable[[Repo, set[str]], bool]
    gate: str | None = None
    """A path made a named pipe before the command starts, for a moment too brief to
    catch by looking: the command stops there, opening it, and the stage is reached once
    it has (and ``reached`` holds). The pipe is removed once the command is killed."""
    logged: Callable[[str], str] | None = None
    """What of the journalled log line the kill is to find written to the gate's path
    (a kill once the line's ``write`` had begun or ended); nothing if None."""


def _phase(repo: Repo) -> str | None:
    journal = rewrite_journal(repo)
    return None if journal is None else journal.get("phase")


def _line(repo: Repo) -> str | None:
    return (rewrite_journal(repo) or {}).get("line")


def _segment_file(repo: Repo) -> bool:
    journal = rewrite_journal(repo)
    name = (journal or {}).get("segment")
    return bool(name) and (repo.root / STORE_DIR / name).exists()


STAGES = [
    Stage("journal begun", lambda repo, before: _phase(repo) == "plan"),
    Stage("new segment begun", lambda repo, before: _segment_file(repo)),
    Stage("replacing", lambda repo, before: _phase(repo) == "replace"),
    Stage(
        "an old pointer removed",
        lambda repo, before: _phase(repo) == "replace" and bool(before - segment_pointers(repo)),
    ),
    Stage("new pointer written", lambda repo, before: bool(segment_pointers(repo) - before)),
    Stage("log line decided", lambda repo, before: _line(repo) is not None, gate=PURGE_LOG),
    Stage(
        "log line cut short",
        lambda repo, before: _line(repo) is not None,
        gate=PURGE_LOG,
        logged=lambda line: line[: len(line) // 2],
    ),
    Stage(
        "log line written",
        lambda repo, before: _line(repo) is not None,
        gate=PURGE_LOG,
        logged=lambda line: line + "\n",
    ),
]


def signal_at(repo: Repo, args: tuple[str, ...], stage: Stage, signum: int) -> tuple[bool, str]:
    """Start ``evalreg ARGS``; signal its process group at ``stage``. Return whether the
    stage was reached before it ended, and what it printed on stderr."""
    before = segment_pointers(repo)
    assert stage.gate is None or signum == signal.SIGKILL, "a command at a gate is killed there"
    with _gate(repo.root / stage.gate if stage.gate else None) as opened:
        proc = runs.start(repo, *args)
        hit = runs.wait_until(proc, lambda: opened() and stage.reached(repo, before))
        if hit:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signum)
        _, err = proc.communicate(timeout=300)
        runs.wait_group_gone(proc.pid)
    if hit and stage.gate is not None and stage.logged is not None:
        line = _line(repo)
        assert line is not None
        (repo.root / stage.gate).write_text(stage.logged(line))
    return hit, err


@contextlib.contextmanager
def _gate(path: Path | None) -> Iterator[Callable[[], bool]]:
    """Make ``path`` a named pipe; yield whether a command has begun to open it (and waits
    there for a writer: it stays held until the pipe's end is closed, at the block's end,
    after which the pipe is removed). No path: no gate, always open."""
    if path is None:
        yield lambda: True
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    held: list[int] = []

    def opened() -> bool:
        if not held:
            try:
                held.append(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError as e:  # ENXIO: nobody opened it to read yet
                assert e.errno == errno.ENXIO, e
        return bool(held)

    try:
        yield opened
    finally:
        for fd in held:
            os.close(fd)
        path.unlink()


def store_md5s(repo: Repo) -> list[str]:
    """The md5 of each store segment's contents in the working tree, sorted."""
    return sorted(
        hashlib.md5(p.read_bytes()).hexdigest()
        for p in (repo.root / STORE_DIR).glob(f"*{SEGMENT_SUFFIX}")
    )


def purge_log(repo: Repo) -> list[dict]:
    """The purge log's entries, the new segment's random name set aside."""
    text = repo.read(PURGE_LOG)
    entries = [json.loads(line) for line in text.splitlines()]
    for entry in entries:
        entry["segment_written"] = bool(entry["segment_written"])
    return entries


def reproduced(repo: Repo) -> tuple[int, str]:
    repo.commit("purge")
    done = runs.in_process(repo, "reproduce", "HEAD")
    return done.returncode, re.sub(r"\b[0-9a-f]{7,40}\b", "<rev>", done.stdout)


@dataclass(frozen=True)
class Ending:
    """What a purge leaves, where two purges of the same item can be compared."""

    store: list[str]
    log: list[dict]
    reproduce: tuple[int, str]


def ending(repo: Repo) -> Ending:
    assert runs.untracked_data(repo) == []
    assert runs.unpushed_md5s(repo) == []
    assert rewrite_journal(repo) is None
    assert not (state_dir(repo.root) / "hold" / "rewrite").exists()
    return Ending(store_md5s(repo), purge_log(repo), reproduced(repo))


@pytest.fixture(scope="module")
def uninterrupted(grown: Path, tmp_path_factory) -> Ending:
    with session_environment(tmp_path_factory):
        repo = Repo(tmp_path_factory.mktemp("uninterrupted") / "repo")
        shutil.copytree(grown, repo.root, symlinks=True)
        done = runs.evalreg(repo, *PURGE)
        assert done.returncode == 0, done.stderr
        return ending(repo)


KILLS = [(stage, signal.SIGKILL) for stage in STAGES] + [
    (STAGES[0], signal.SIGINT),
    (STAGES[2], signal.SIGTERM),
]


@pytest.mark.parametrize(
    ("stage", "signum"),
    [
        # Every signal, and SIGKILL at every third stage, in the README's command.
        pytest.param(
            stage,
            signum,
            id=f"{stage.name}-{signum.name}",
            marks=() if signum != signal.SIGKILL or STAGES.index(stage) % 3 == 0 else (SLOW,),
        )
        for stage, signum in KILLS
    ],
)
def test_a_purge_stopped_at_any_stage_ends_as_an_uninterrupted_one(
    registry: Repo, uninterrupted: Ending, stage: Stage, signum: int
):
    hit, err = signal_at(registry, PURGE, stage, signum)
    assert hit and "Traceback" not in err
    # SIGINT and SIGTERM unwind, but not out of the replacing step: it runs to its end.
    left = rewrite_journal(registry) is not None
    assert left == (signum == signal.SIGKILL or stage.name == "journal begun")
    if signum == signal.SIGINT:
        assert "the next evalreg command finishes it" in err
    after = runs.evalreg(registry, "status")
    assert after.returncode == 0, after.stderr
    assert "Traceback" not in after.stderr
    assert (f"finished an interrupted purge of item {ITEM}" in after.stderr) == left
    assert ending(registry) == uninterrupted
    again = runs.evalreg(registry, "status")
    assert "interrupted" not in again.stderr


def test_a_purge_that_cannot_be_done_again_says_so_and_stays_journalled(registry: Repo):
    hit, _ = signal_at(registry, PURGE, STAGES[0], signal.SIGKILL)
    assert hit
    registry.write("registry/selections/labels.yaml", "not: [a selection")
    status = runs.evalreg(registry, "check")
    assert f"an interrupted purge of item {ITEM} is not finished" in status.stderr
    assert "Traceback" not in status.stderr
    assert rewrite_journal(registry) is not None


COMPACT_STAGES = [STAGES[1], STAGES[2], STAGES[3], STAGES[4]]


@pytest.mark.parametrize("stage", every_nth(COMPACT_STAGES, 2, ids=lambda s: s.name))
def test_a_compaction_killed_at_any_stage_leaves_one_copy_of_every_record(
    registry: Repo, stage: Stage
):
    records = sorted(
        line
        for p in (registry.root / STORE_DIR).glob(f"*{SEGMENT_SUFFIX}")
        for line in p.read_bytes().splitlines()
    )
    hit, err = signal_at(registry, ("store", "compact"), stage, signal.SIGKILL)
    assert hit and "Traceback" not in err
    # The phase the kill left in the journal: on a busy machine a kill sent once the new
    # segment is seen may land after the compaction went on to replace the old ones.
    killed_in = _phase(registry)
    after = runs.evalreg(registry, "check")
    assert "Traceback" not in after.stderr
    assert "or delete it" not in after.stderr
    assert rewrite_journal(registry) is None
    assert runs.untracked_data(registry) == []
    assert runs.unpushed_md5s(registry) == []
    segments = list((registry.root / STORE_DIR).glob(f"*{SEGMENT_SUFFIX}"))
    assert sorted(line for p in segments for line in p.read_bytes().splitlines()) == records
    compacted = "finished an interrupted compaction" in after.stderr
    assert compacted or "undid an interrupted compaction" in after.stderr
    # Undone while it was planning (its new segment still being written), finished once
    # it had begun to replace the old segments.
    assert killed_in in ("plan", "replace"), killed_in
    if stage.name != "new segment begun":
        assert killed_in == "replace"
    assert compacted == (killed_in == "replace"), after.stderr
    assert len(segments) == (1 if compacted else 2)
    registry.git("add", "-A")
    registry.git("commit", "-q", "--allow-empty", "-m", "after compaction")
    assert runs.in_process(registry, "reproduce", "HEAD").returncode == 0
