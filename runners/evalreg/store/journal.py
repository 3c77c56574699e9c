"""The run journal: a run's closing step as a transaction the next command can finish.

A run writes in two stages. While it fetches and grades it only appends to its own store
segment and writes results to temporary files named for the run, so that the previous
results stay in place. Then, in one short step, it puts the results in place and tracks
what it wrote with DVC. A signal can stop the process anywhere, SIGKILL included, so the
journal (``journal.json`` in the repository's state directory, beside the lock) records
which stage the run had reached and what it wrote:

- ``fetch``: the run's segments are listed. A run that stops here is rolled back: its
  temporary results are removed (the previous results stand), and its segments are kept
  and tracked, so no response that reached a segment is ever bought again. Only the
  segments the journal names: a segment on disk that no journal names and no pointer
  here tracks is another branch's (its pointer is on that branch) or one an older evalreg
  left behind. It is read like any other, so its responses are never bought again, and a
  run tracks it when its results use it (``runner``); recovery never sweeps it into this
  branch.
- ``commit``: the results are complete and their temporary files are listed, with the
  content of ``dvc.yaml`` to write. A run that stops here is rolled forward: results are
  moved into place, every file is tracked, the summaries (and the DVC metrics files
  derived from them) are written last. Before DVC
  touches a file it is hard-linked into the state directory, because ``dvc add`` with a
  cache that links deletes and re-creates it; a file DVC left missing is restored from
  that link.

Once a run's files are tracked the journal is removed. Paths still to push are kept in
``unpushed.json`` until a push succeeds. Every command that reads or writes results
repairs first (``store.recovery``); that does nothing unless a journal is there and nobody
holds the repository lock. While a run holds it, its journal says which files are its own
(``live_run``): a command that only reads leaves them alone, and does not count them.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from evalreg import dvclock, dvcrepo
from evalreg.store.lock import Holder, holder, state_dir
from evalreg.store.segments import keepable

JOURNAL = "journal.json"
UNPUSHED = "unpushed.json"
HOLD = "hold"
TMP_SUFFIX = ".tmp"

Add = Callable[[list[str]], None]
"""``dvc add`` these repository-relative paths (raises when DVC cannot)."""


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_durably(path: Path, data: bytes | Iterable[bytes]) -> None:
    """Replace ``path`` with ``data`` (bytes, or chunks of them written as they come)
    atomically: the old bytes or the new, never half."""
    tmp = path.with_name(f"{path.name}.{secrets.token_hex(4)}{TMP_SUFFIX}")
    try:
        with tmp.open("wb") as f:
            for chunk in (data,) if isinstance(data, bytes) else data:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


@dataclass
class Staged:
    """A result file written under a temporary name, to be moved into place."""

    tmp: str
    path: str


@dataclass
class Journal:
    """One run's journal; ``begin`` writes it, ``commit`` closes the run."""

    root: Path
    run: str
    push: bool
    phase: str = "fetch"
    segments: list[str] = field(default_factory=list)
    items: list[Staged] = field(default_factory=list)
    summaries: list[Staged] = field(default_factory=list)
    metrics_index: str | None = None

    @property
    def path(self) -> Path:
        return state_dir(self.root) / JOURNAL

    @property
    def hold(self) -> Path:
        return state_dir(self.root) / HOLD / self.run

    def tmp_name(self, rel: str) -> str:
        """The temporary name this run writes ``rel`` under (beside it, same filesystem)."""
        return f"{rel}.{self.run}{TMP_SUFFIX}"

    @classmethod
    def begin(cls, root: Path, *, push: bool) -> Journal:
        journal = cls(root, secrets.token_hex(6), push)
        journal.path.parent.mkdir(parents=True, exist_ok=True)
        journal.save()
        return journal

    def save(self) -> None:
        state = {
            "version": 1,
            "run": self.run,
            "pid": os.getpid(),
            "phase": self.phase,
            "push": self.push,
            "segments": self.segments,
            "items": [[s.tmp, s.path] for s in self.items],
            "summaries": [[s.tmp, s.path] for s in self.summaries],
            "metrics_index": self.metrics_index,
        }
        write_durably(self.path, json.dumps(state, indent=1, sort_keys=True).encode())

    @classmethod
    def load(cls, root: Path) -> Journal | None:
        try:
            state = json.loads((state_dir(root) / JOURNAL).read_bytes())
            return cls(
                root,
                str(state["run"]),
                bool(state["push"]),
                str(state["phase"]),
                [str(s) for s in state["segments"]],
                [Staged(str(t), str(p)) for t, p in state["items"]],
                [Staged(str(t), str(p)) for t, p in state["summaries"]],
                state.get("metrics_index"),
            )
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError):
            # Written atomically, so never torn: a journal in another shape is not ours to
            # act on. Orphaned segments are still found and tracked by a later rollback.
            return None

    def files(self) -> set[str]:
        """Every file in the working tree this run writes (repository-relative): its
        segments, and its results under their temporary names and their own."""
        staged = [*self.items, *self.summaries]
        return {*self.segments, *(s.tmp for s in staged), *(s.path for s in staged)}

    def add_segment(self, rel: str) -> None:
        self.segments.append(rel)
        self.save()

    # ------------------------------------------------------------ the closing step
    def commit(
        self, items: list[Staged], summaries: list[Staged], metrics_index: str | None, add: Add
    ) -> list[str]:
        """Put the results in place and track every file this run wrote; return the
        tracked paths. Call it with ending signals deferred (``interrupts.deferred``):
        whatever stops it, ``recover`` finishes the same work."""
        self.items, self.summaries, self.metrics_index = items, summaries, metrics_index
        segments = keepable(self.root, self.segments)
        self.segments = segments
        self._hold([*segments, *(s.tmp for s in items)])
        self.phase = "commit"
        self.save()
        return self._roll_forward(add)

    def _hold(self, rels: list[str]) -> None:
        """Hard-link each file into the state directory: ``dvc add`` with a cache that
        links replaces the file (delete, then link from its cache), and a kill in between
        would lose it."""
        self.hold.mkdir(parents=True, exist_ok=True)
        for n, rel in enumerate(rels):
            link = self.hold / str(n)
            link.unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # another filesystem: DVC's cache must do
                os.link(self.root / rel, link)
        _fsync_dir(self.hold)

    def _roll_forward(self, add: Add) -> list[str]:
        root = self.root
        # (hard link, where the file is now, where it goes), in ``_hold``'s order.
        moves = [(rel, rel) for rel in self.segments] + [(s.tmp, s.path) for s in self.items]
        for n, (now, final) in enumerate(moves):
            if (root / now).exists() and now != final:
                (root / now).replace(root / final)
            link = self.hold / str(n)
            if not (root / final).exists() and link.exists():
                # A killed `dvc add` had deleted it and not copied it back yet.
                os.link(link, root / final)
        tracked = [final for _, final in moves if (root / final).exists()]
        if tracked:
            add(tracked)
        # The summaries go last: a summary in place means its items file is tracked.
        for staged in self.summaries:
            if (root / staged.tmp).exists():
                (root / staged.tmp).replace(root / staged.path)
        if self.metrics_index is not None:
            write_durably(root / "dvc.yaml", self.metrics_index.encode())
        if self.push and tracked:
            mark_unpushed(root, tracked)
        self.path.unlink(missing_ok=True)
        shutil.rmtree(self.hold, ignore_errors=True)
        _fsync_dir(self.path.parent)
        return tracked

    def _roll_back(self, add: Add) -> list[str]:
        """The run stopped before its results were complete: remove its temporary
        result files and keep (track) every response it stored."""
        root = self.root
        for generated in ("results", "metrics"):
            directory = root / "reports" / generated
            if directory.is_dir():
                for tmp in directory.rglob(f"*.{self.run}{TMP_SUFFIX}"):
                    tmp.unlink(missing_ok=True)
        segments = keepable(root, self.segments)
        if segments:
            add(segments)
            if self.push:
                mark_unpushed(root, segments)
        self.path.unlink(missing_ok=True)
        shutil.rmtree(self.hold, ignore_errors=True)
        return segments


# ---------------------------------------------------------------- pushes still owed
def unpushed(root: Path) -> list[str]:
    """Paths a run tracked but could not push (yet)."""
    try:
        data = json.loads((state_dir(root) / UNPUSHED).read_bytes())
    except (FileNotFoundError, ValueError):
        return []
    return [str(p) for p in data] if isinstance(data, list) else []


def mark_unpushed(root: Path, rels: list[str]) -> None:
    owed = sorted(set(unpushed(root)) | set(rels))
    write_durably(state_dir(root) / UNPUSHED, json.dumps(owed).encode())


def mark_pushed(root: Path, rels: list[str]) -> None:
    owed = sorted(set(unpushed(root)) - set(rels))
    path = state_dir(root) / UNPUSHED
    if owed:
        write_durably(path, json.dumps(owed).encode())
    else:
        path.unlink(missing_ok=True)


# ---------------------------------------------------------------- recovery
@dataclass(frozen=True)
class Recovery:
    """What ``recover`` found and did."""

    action: str
    """``completed`` (rolled forward), ``rolled back``, or ``in progress`` (a live run
    holds the lock: nothing was touched)."""
    tracked: tuple[str, ...] = ()
    results: tuple[str, ...] = ()
    holder: Holder | None = None
    """The live run, ``in progress``."""

    def describe(self) -> str:
        if self.action == "in progress":
            return in_progress(self.holder or Holder())
        files = len(self.tracked)
        if self.action == "completed":
            return (
                f"finished an interrupted run's closing step: {len(self.results)} result "
                f"files put in place, {files} files tracked with DVC"
            )
        return (
            f"rolled back an interrupted run: its unfinished results were removed, and the "
            f"{files} store segments it wrote are kept and tracked (nothing is bought again)"
        )


def _dvc_add(root: Path) -> Add:
    def add(paths: list[str]) -> None:

        dvcrepo.track(root, paths, push=False)

    return add


def recover_locked(root: Path, add: Add | None = None) -> Recovery | None:
    """Finish or roll back an interrupted run; the caller holds the repository lock."""
    add = add or _dvc_add(root)
    journal = Journal.load(root)
    if journal is None:
        return None

    dvclock.clear_torn_rwlock(root)  # a `dvc add` killed mid-write of DVC's own lock table
    if journal.phase == "commit":
        results = tuple(s.path for s in (*journal.items, *journal.summaries))
        return Recovery("completed", tracked=tuple(journal._roll_forward(add)), results=results)
    return Recovery("rolled back", tracked=tuple(journal._roll_back(add)))


def pending(root: Path) -> bool:
    """Whether a run's journal is there (one ``stat``): ``store.recovery`` finishes it."""
    return (state_dir(root) / JOURNAL).exists()


@dataclass(frozen=True)
class LiveRun:
    """A run writing to this repository now."""

    holder: Holder
    files: frozenset[str]
    """The files in the working tree it writes (``Journal.files``)."""


def live_run(root: Path) -> LiveRun | None:
    """The run writing to this repository now, if one is: its journal is there and the
    lock is held. Nothing is taken or written (a stale lock, whose holder has ended, is
    no run: ``recover`` repairs what it left)."""
    if not (state_dir(root) / JOURNAL).exists():
        return None
    running = holder(root)
    if running is None or running.elsewhere(root):
        return None
    journal = Journal.load(root)
    return LiveRun(running, frozenset(journal.files() if journal is not None else ()))


def in_progress(running: Holder) -> str:
    """What a command that only reads says of a live run."""
    return (
        f"a run is in progress in this repository ({running.describe()}): its results may "
        "change until it ends"
    )
