"""The rewrite journal: a purge or compaction as a transaction the next command finishes.

Both replace some of the store's segments with one new segment: a compaction keeps every
record, a purge leaves out an item's. A signal can stop the process anywhere, SIGKILL
included, so the journal (``rewrite.json`` in the repository's state directory, beside
the run journal) records which stage it had reached:

- ``plan``: what is asked (a purge's item, reason and date), and the name of the new
  segment as soon as it is chosen. Nothing else has changed yet. An interrupted
  compaction is rolled back (the new segment's partial file goes; the store is as it
  was). An interrupted purge is done again from the start, never dropped: a purge is
  an erasure someone asked for, and a command that quietly forgot it would keep the data.
- ``replace``: the new segment is complete, verified and synced (and hard-linked into
  the state directory, as a run's files are, because ``dvc add`` with a cache that links
  deletes and re-creates it); the segments it replaces, the DVC objects they were, and
  the purge's log entry are listed. From here the rewrite is always rolled forward: the
  old pointers and files go, the new segment is tracked and pushed (a push that fails is
  owed, as a run's is), and the purge's line is added to its log once.

Rolling forward is idempotent: each step looks at what is there, so a kill during
recovery is recovered in turn. Purges and compactions hold the repository lock
throughout, like runs; ``evalreg.store.recovery`` finishes both kinds of journal.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalreg import dvcrepo
from evalreg.store.journal import HOLD, mark_pushed, mark_unpushed, write_durably
from evalreg.store.lock import state_dir
from evalreg.store.segments import STORE_DIR, SegmentWriter, segment_name

REWRITE = "rewrite.json"
KINDS = ("purge", "compact")


@dataclass(frozen=True)
class Replaced:
    """What rolling a rewrite forward did."""

    segment: str | None
    """The new segment's name (None when nothing was left to keep)."""
    objects: tuple[str, ...]
    """md5s of the replaced segments' DVC objects (still in the cache and on the remote)."""
    pointers: tuple[str, ...]
    """The replaced segments' pointers, removed."""
    pushed: bool = False
    """Whether the new segment reached the remote (it was asked to, and the push worked)."""
    push_error: str | None = None
    stage: dvcrepo.StagedObjects = field(default_factory=dvcrepo.StagedObjects)
    """The new segment's object, pushed to an in-repository remote and staged in git."""


@dataclass
class Rewrite:
    """One purge's or compaction's journal; ``begin`` writes it, ``finish`` ends it."""

    root: Path
    kind: str
    push: bool
    request: dict[str, Any] = field(default_factory=dict)
    """What was asked: a purge's item, reason, eval set and date."""
    phase: str = "plan"
    segment: str | None = None
    """The new segment's file name, once chosen."""
    written: bool = False
    """Whether the new segment holds anything (an empty one is not kept)."""
    old: list[str] = field(default_factory=list)
    objects: list[str] = field(default_factory=list)
    log: str | None = None
    """The log a purge adds its line to (repository-relative)."""
    entry: dict[str, Any] | None = None
    """A purge's log entry, all but its next steps (they depend on the push)."""
    line: str | None = None
    """The log line itself, once decided: written once, however often recovery runs."""

    @property
    def path(self) -> Path:
        return state_dir(self.root) / REWRITE

    @property
    def hold(self) -> Path:
        return state_dir(self.root) / HOLD / "rewrite"

    @classmethod
    def begin(cls, root: Path, kind: str, *, push: bool, request: dict[str, Any]) -> Rewrite:
        rewrite = cls(root, kind, push, dict(request))
        rewrite.path.parent.mkdir(parents=True, exist_ok=True)
        rewrite.save()
        return rewrite

    def save(self) -> None:
        state = {
            "version": 1,
            "kind": self.kind,
            "pid": os.getpid(),
            "push": self.push,
            "request": self.request,
            "phase": self.phase,
            "segment": self.segment,
            "written": self.written,
            "old": self.old,
            "objects": self.objects,
            "log": self.log,
            "entry": self.entry,
            "line": self.line,
        }
        write_durably(self.path, json.dumps(state, indent=1, sort_keys=True).encode())

    @classmethod
    def load(cls, root: Path) -> Rewrite | None:
        try:
            state = json.loads((state_dir(root) / REWRITE).read_bytes())
            rewrite = cls(
                root,
                str(state["kind"]),
                bool(state["push"]),
                dict(state["request"]),
                str(state["phase"]),
                state["segment"],
                bool(state["written"]),
                [str(n) for n in state["old"]],
                [str(m) for m in state["objects"]],
                state["log"],
                state["entry"],
                state["line"],
            )
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError, AttributeError):
            return None  # written atomically, never torn: another shape is not ours
        if rewrite.kind not in KINDS or rewrite.phase not in ("plan", "replace"):
            return None
        return rewrite

    # ------------------------------------------------------------ writing the segment
    def writer(self, label: str) -> SegmentWriter:
        """The new segment's writer, its name journalled before the file exists."""
        self.segment = segment_name(label)
        self.save()
        return SegmentWriter(self.root, name=self.segment)

    def discard(self) -> None:
        """Undo the ``plan`` stage, journal and all (``discard_segment``)."""
        self.discard_segment()
        self._close()

    def discard_segment(self) -> None:
        """The ``plan`` stage's new segment goes, partial or whole (unless DVC tracks it,
        which only a finished rewrite does): a purge done again writes another."""
        if self.segment is not None:
            rel = f"{STORE_DIR}/{self.segment}"
            if not (self.root / f"{rel}.dvc").exists():
                (self.root / rel).unlink(missing_ok=True)
            self.segment = None
            self.save()

    # ------------------------------------------------------------ the replacing step
    def replace(
        self,
        old: list[str],
        *,
        written: bool,
        log: str | None = None,
        entry: dict[str, Any] | None = None,
        line: Callable[[dict[str, Any], Replaced], str] | None = None,
    ) -> Replaced:
        """The new segment is complete and verified: journal the step that replaces
        ``old`` with it, then take it. Call it with ending signals deferred
        (``interrupts.deferred``): whatever stops it, ``finish`` does the same work."""
        directory = self.root / STORE_DIR
        self.old = sorted(old)
        self.objects = sorted(
            md5
            for name in self.old
            if (pointer := directory / f"{name}.dvc").is_file()
            and (md5 := dvcrepo.pointer_md5(pointer.read_bytes())) is not None
        )
        self.written, self.log, self.entry = written, log, entry
        if written and self.segment is not None:
            self._hold(directory / self.segment)
        self.phase = "replace"
        self.save()
        return self.finish(line)

    def _hold(self, path: Path) -> None:
        self.hold.mkdir(parents=True, exist_ok=True)
        link = self.hold / path.name
        link.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # another filesystem: DVC's cache must do
            os.link(path, link)

    def finish(self, line: Callable[[dict[str, Any], Replaced], str] | None = None) -> Replaced:
        """Roll the ``replace`` stage forward; each step is skipped once it is done.

        ``line`` makes the log's line from the entry and what was done, the first time
        only: the line is journalled before it is written, so it is written once."""
        root, directory = self.root, self.root / STORE_DIR
        pointers = [f"{STORE_DIR}/{n}.dvc" for n in self.old]
        there = [p for p in pointers if (root / p).exists()]
        if there:
            dvcrepo.untrack(root, there)
        for name in self.old:
            (directory / name).unlink(missing_ok=True)
        new = f"{STORE_DIR}/{self.segment}" if self.written and self.segment else None
        failed: str | None = None
        stage = dvcrepo.StagedObjects()
        if new is not None:
            link = self.hold / str(self.segment)
            if not (root / new).exists() and link.exists():
                os.link(link, root / new)  # a killed `dvc add` had deleted it
            dvcrepo.track(root, [new], push=False)
            if self.push:
                failed = dvcrepo.push(root, [new])
                if failed is None:
                    stage = dvcrepo.stage_objects(root, [new])
                    mark_pushed(root, [new])
                else:
                    mark_unpushed(root, [new])
        done = Replaced(
            self.segment if new else None,
            tuple(self.objects),
            tuple(pointers),
            pushed=new is not None and self.push and failed is None,
            push_error=failed,
            stage=stage,
        )
        if self.log is not None and self.entry is not None:
            if self.line is None and line is not None:
                self.line = line(self.entry, done)
                self.save()
            if self.line is not None:
                _append_once(root / self.log, self.line)
        self._close()
        return done

    def _close(self) -> None:
        self.path.unlink(missing_ok=True)
        shutil.rmtree(self.hold, ignore_errors=True)
        with contextlib.suppress(OSError):
            fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def _append_once(path: Path, line: str) -> None:
    """Add ``line`` to the log at ``path`` unless it already ends with it (a recovery
    after the line was written)."""
    data = line.encode() + b"\n"
    try:
        there = path.read_bytes()
    except FileNotFoundError:
        there = b""
    if there.endswith(data):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as f:
        if there and not there.endswith(b"\n"):  # a line cut short by a kill
            f.truncate(there.rfind(b"\n") + 1)
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def pending(root: Path) -> bool:
    """Whether a purge or compaction journal is there (one ``stat``)."""
    return (state_dir(root) / REWRITE).exists()
