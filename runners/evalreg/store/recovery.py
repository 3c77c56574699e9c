"""What every command does first: finish what a killed run, purge or compaction left.

Two journals can be left in the repository's state directory: a run's
(``store.journal``) and a purge's or compaction's (``store.rewrite``). A command that
writes repairs both under the repository lock it takes; a command that only reads takes
the lock just long enough to repair them, unless a live process holds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evalreg.errors import EvalregError
from evalreg.store import journal, rewrite
from evalreg.store.lock import Holder, LockedError, RepositoryLock


@dataclass(frozen=True)
class Finished:
    """A purge or compaction that a command finished (or could not)."""

    kind: str
    item: str | None = None
    rolled_back: bool = False
    problem: str | None = None
    """Why a purge could not be done again; its journal stays for the next command."""
    reason: str | None = None

    def describe(self) -> str:
        if self.kind == "compact":
            if self.rolled_back:
                return (
                    "undid an interrupted compaction: it had not replaced any segment, so "
                    "the store is as it was (`evalreg store compact` to compact it)"
                )
            return "finished an interrupted compaction: its new segment is tracked"
        if self.problem is not None:
            return (
                f"an interrupted purge of item {self.item} is not finished: {self.problem}. "
                "The next evalreg command tries again; or run `evalreg store purge "
                f"{self.item} --reason {self.reason!r}` yourself"
            )
        return (
            f"finished an interrupted purge of item {self.item}: its responses are "
            "removed from the store and the purge is logged; see `git status` for what "
            "to commit"
        )


Repaired = journal.Recovery | Finished


def recover_locked(root: Path) -> list[Repaired]:
    """Finish or undo what a killed command left; the caller holds the repository lock."""
    out: list[Repaired] = []
    run = journal.recover_locked(root)
    if run is not None:
        out.append(run)
    pending = rewrite.Rewrite.load(root)
    if pending is None:
        return out
    from evalreg import dvclock

    dvclock.clear_torn_rwlock(root)
    if pending.kind == "compact":
        if pending.phase == "plan":
            pending.discard()
            out.append(Finished("compact", rolled_back=True))
        else:
            pending.finish()
            out.append(Finished("compact"))
        return out
    from evalreg.store.purge import finish_purge

    item = str(pending.request.get("item"))
    try:
        finish_purge(pending)
    except (EvalregError, OSError, RuntimeError) as exc:
        reason = str(pending.request.get("reason"))
        out.append(Finished("purge", item, problem=str(exc) or type(exc).__name__, reason=reason))
    else:
        out.append(Finished("purge", item))
    return out


def recover(root: Path) -> list[Repaired]:
    """For commands that do not write: repair what a killed command left, if anything
    is there and no live process holds the lock (cheap when there is nothing to do: two
    ``stat`` calls)."""
    if not journal.pending(root) and not rewrite.pending(root):
        return []
    try:
        lock = RepositoryLock(root).acquire()
    except LockedError as exc:
        return [journal.Recovery("in progress", holder=exc.holder or Holder())]
    with lock:
        return recover_locked(root)
