"""DVC's lock, from the outside: who holds it, and what a killed process left of it.

DVC takes a lock on the repository (``.dvc/tmp/lock``: ``flock``, or with
``core.hardlink_lock`` a hard link that outlives a killed holder) and records in its lock
table (``.dvc/tmp/rwlock``) which process writes which path. It gives up after three
seconds, and counts an ended process that nobody has reaped yet (a zombie) as a holder.
Every DVC call evalreg makes that takes the lock goes through ``dvcrepo.with_repo``, which
asks this module, on DVC's ``LockError``, who holds the lock (``lock_holders``), clears
what ended processes left, and waits only while a live process holds it.

DVC documents ``dvc.api`` only: this module is evalreg's one reader of DVC's lock, and
what it reads is DVC's own (``DVC_NAMES``; the pid DVC writes in ``.dvc/tmp/lock``; the
lock table's ``{"read"|"write": {path: record or [records]}}`` with a ``pid`` in each
record; the claim files of a hardlink lock). ``tests/test_dvc_internals.py`` fails, naming
the installed DVC, as soon as a release moves or reshapes any of it.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DVC_NAMES = {"dvc.lock": ("HardlinkLock", "LockError", "make_lock"), "dvc.repo": ("lock_repo",)}
"""DVC's names this module (and ``dvcrepo``) imports, outside DVC's documented API."""

LOCK_PATIENCE = 30.0
"""Seconds, in all, that a DVC call waits for DVC's lock while a live process holds it,
unless ``EVALREG_DVC_LOCK_WAIT`` says otherwise (``patience``)."""

_LOCK_NOTE = "lock.evalreg"
"""Written in DVC's ``tmp`` directory while an evalreg process holds a hardlink lock: its
pid, host and the lock's inode. A SIGKILL leaves lock and note behind, and the note proves
the lock's holder gone (a hardlink lock names no process)."""


def pause(seconds: float) -> None:
    time.sleep(seconds)


def patience() -> float:
    """How long a DVC call waits for a live holder of DVC's lock: ``LOCK_PATIENCE``, or the
    seconds ``EVALREG_DVC_LOCK_WAIT`` sets (a job sharing its repository with long DVC
    commands may wait longer; 0 does not wait)."""
    try:
        return max(0.0, float(os.environ["EVALREG_DVC_LOCK_WAIT"]))
    except (KeyError, ValueError):
        return LOCK_PATIENCE


@contextlib.contextmanager
def holding_lock(repo: Any) -> Iterator[None]:
    """DVC's lock on the open ``repo`` for the block (``LockError`` at once when another
    process holds it); a hardlink lock is noted as this process's while held."""
    from dvc.lock import HardlinkLock
    from dvc.repo import lock_repo

    with lock_repo(repo):
        tmp = Path(repo.tmp_dir)
        note = None
        if isinstance(repo.lock, HardlinkLock):
            import socket

            note = tmp / _LOCK_NOTE
            mine = {"pid": os.getpid(), "host": socket.gethostname()}
            with contextlib.suppress(OSError):
                note.write_text(json.dumps({**mine, "inode": (tmp / "lock").stat().st_ino}))
        try:
            yield
        finally:
            if note is not None:
                note.unlink(missing_ok=True)


@dataclass(frozen=True)
class DvcLockHolder:
    """A process that holds DVC's lock, or a record in DVC's lock table."""

    holds: str
    """What it holds, as messages say it (``.dvc/tmp/lock``, a path in the lock table)."""
    pid: int | None = None
    command: str | None = None

    def describe(self) -> str:
        if self.pid is None:
            return f"{self.holds} (its holder cannot be named)"
        command = f" (`{self.command}`)" if self.command else ""
        return f"pid {self.pid}{command}, which holds {self.holds}"


def unnamed_hardlink(holders: list[DvcLockHolder]) -> bool:
    """A hardlink lock nothing proves alive: waiting for it is waiting for nothing."""
    return all(h.pid is None for h in holders)


def locked_message(holders: list[DvcLockHolder], waited: float, error: str) -> str:
    if not holders:
        return (
            "DVC's lock on this repository (.dvc/tmp/lock) could not be taken, and no process "
            f"holding it can be found ({error.splitlines()[0]}). Run the command again; if "
            "it fails the same way, see that no DVC process is running in this repository"
        )
    if unnamed_hardlink(holders):
        return (
            "DVC's lock on this repository (.dvc/tmp/lock, a hardlink lock: "
            "core.hardlink_lock) is held, and nothing names its holder: a DVC process "
            "killed while holding it leaves it behind. If no DVC process is running in this "
            "repository, on any machine that shares it, remove .dvc/tmp/lock and run the "
            "command again (removing it while DVC runs can damage DVC's cache)"
        )
    named = "; ".join(h.describe() for h in holders)
    return (
        f"DVC's lock on this repository is held by {named} (waited {waited:.0f} s). Wait "
        "for that process to finish, or stop it, then run the command again"
    )


def lock_holders(root: Path, *, hardlink: bool) -> tuple[list[DvcLockHolder], bool]:
    """Who holds DVC's lock, and whether a lock or records left by ended processes were
    cleared (then DVC can simply be asked again)."""
    tmp = Path(root) / ".dvc" / "tmp"
    holders, cleared = [], False
    lock = tmp / "lock"
    if hardlink:
        found, cleared = _hardlink_holder(tmp)
        holders += [found] if found is not None else []
    else:
        pids = _flock_pids(lock)
        pids = _written_pid(lock) if pids is None else pids
        holders += [DvcLockHolder(".dvc/tmp/lock", pid, _command(pid)) for pid in pids]
    recorded, swept = _sweep_rwlock(tmp, hardlink=hardlink)
    return holders + recorded, cleared or swept


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a process running on this machine. A zombie (ended, not yet
    reaped by its parent) is not: it holds nothing, though DVC counts it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        if Path("/proc/self").exists():
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] not in (["Z"], ["X"])


def _command(pid: int) -> str | None:
    """The command line of ``pid``, for messages, or None."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    text = " ".join(a.decode(errors="replace") for a in args if a)
    return text[:200] or None


def _flock_pids(path: Path) -> list[int] | None:
    """The processes holding a ``flock`` on ``path``, as ``/proc/locks`` lists them; None
    where there is no such list."""
    try:
        table = Path("/proc/locks").read_text()
    except OSError:
        return None
    try:
        inode = path.stat().st_ino
    except OSError:
        return []
    pids = []
    for line in table.splitlines():
        fields = line.split()
        if "FLOCK" in fields and "->" not in fields:  # "->": one waiting for it
            at = fields.index("FLOCK")
            pid, where = fields[at + 3 : at + 5] if len(fields) > at + 4 else ("", "")
            if where.endswith(f":{inode}") and pid.isdigit():
                pids.append(int(pid))
    return pids


def _written_pid(path: Path) -> list[int]:
    """The pid DVC's default lock writes in its file (its last holder's, which may have
    released it since), when that process is alive and not this one."""
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return []
    pid = int(text) if text.isdigit() else None
    return [pid] if pid is not None and pid != os.getpid() and _alive(pid) else []


def _hardlink_holder(tmp: Path) -> tuple[DvcLockHolder | None, bool]:
    """Who holds the hardlink lock ``tmp/lock``, and whether what an ended process left was
    cleared: the lock of an evalreg process that has ended (its note says so), or files of
    DVC's default lock, which a hardlink lock never takes over (``_plain_leftover``)."""
    import socket

    cleared = [_plain_leftover(tmp / name) for name in ("lock", "rwlock.lock")]
    lock = tmp / "lock"
    try:
        st = lock.stat()
    except FileNotFoundError:
        return None, any(cleared)
    try:
        note = json.loads((tmp / _LOCK_NOTE).read_bytes())
    except (OSError, ValueError):
        note = None
    note = note if isinstance(note, dict) and note.get("inode") == st.st_ino else {}
    pid = note.get("pid") if isinstance(note.get("pid"), int) else None
    if pid is not None and note.get("host") == socket.gethostname() and not _alive(pid):
        # Its lock table's lock too, if taken while it held the lock: a DVC process edits
        # the table only under the lock, so that one was its own, cut off mid-edit.
        table = tmp / "rwlock.lock"
        with contextlib.suppress(OSError):
            taken = table.stat()
            if taken.st_nlink > 1 and taken.st_ctime >= (tmp / _LOCK_NOTE).stat().st_mtime:
                _remove_hardlink_lock(table)
        _remove_hardlink_lock(lock)
        (tmp / _LOCK_NOTE).unlink(missing_ok=True)
        return None, True
    return DvcLockHolder(".dvc/tmp/lock", pid, _command(pid) if pid else None), any(cleared)


def _remove_hardlink_lock(lock: Path) -> None:
    """Remove a hardlink lock: its claim file (the other name of the same file), then it."""
    with contextlib.suppress(OSError):
        inode = lock.stat().st_ino
        for claim in lock.parent.glob("*.lock"):
            with contextlib.suppress(OSError):
                if claim != lock and claim.stat().st_ino == inode:
                    claim.unlink()
    lock.unlink(missing_ok=True)


def _plain_leftover(path: Path) -> bool:
    """Remove ``path`` if it is a file DVC's default lock left (it never removes them: a
    pid in a file with no other link), which no process locks now; return whether.

    With ``core.hardlink_lock`` turned on in a repository DVC has used before, such a file
    would otherwise refuse DVC's hardlink lock for good."""
    try:
        st = path.stat()
        written = path.read_text(errors="replace").strip()
    except (OSError, ValueError):
        return False
    if st.st_nlink != 1 or not written.isdigit() or _flock_pids(path) != []:
        return False
    path.unlink(missing_ok=True)
    return True


def _sweep_rwlock(tmp: Path, *, hardlink: bool) -> tuple[list[DvcLockHolder], bool]:
    """The live processes DVC's lock table records, after removing the records of those
    that have ended; and whether any were removed. Edited under DVC's own lock for the
    table (as DVC edits it), and replaced whole, never rewritten in place."""

    from dvc.lock import LockError, make_lock

    path = tmp / "rwlock"
    if not path.is_file():
        return [], False
    try:
        with make_lock(str(tmp / "rwlock.lock"), tmp_dir=str(tmp), hardlink_lock=hardlink):
            try:
                table = json.loads(path.read_bytes())
            except (OSError, ValueError):
                return [], False
            live, ended = _records(table)
            if ended:
                kept = path.with_name(f"rwlock.{os.getpid()}.tmp")
                kept.write_text(json.dumps(table))
                kept.replace(path)
    except LockError:
        return [], False
    return live, ended


def _records(table: Any) -> tuple[list[DvcLockHolder], bool]:
    """The live processes recorded in DVC's lock ``table``, once the records of ended
    ones are taken out of it; and whether any were."""
    live, ended = [], False
    for mode in ("read", "write"):
        paths = table.get(mode) if isinstance(table, dict) else None
        if not isinstance(paths, dict):
            continue
        for out, infos in list(paths.items()):
            kept = []
            for info in infos if isinstance(infos, list) else [infos]:
                pid = info.get("pid") if isinstance(info, dict) else None
                if isinstance(pid, int) and not _alive(pid):
                    ended = True
                    continue
                kept.append(info)
                if isinstance(pid, int):
                    where = f"{out} in DVC's lock table (.dvc/tmp/rwlock)"
                    live.append(DvcLockHolder(where, pid, _command(pid)))
            if not kept:
                del paths[out]
            elif isinstance(infos, list):
                paths[out] = kept
    return live, ended


def clear_torn_rwlock(root: Path) -> bool:
    """Remove DVC's lock table (``.dvc/tmp/rwlock``) if it does not parse; return whether.

    DVC rewrites that file in place, without a temporary name, as each ``dvc add`` starts
    and ends; a SIGKILL in between leaves it empty or half written, and every later DVC
    command then refuses to run. A torn table records no holder worth keeping, so the
    recovery of an interrupted run (under the repository lock) clears it.
    """

    path = Path(root) / ".dvc" / "tmp" / "rwlock"
    try:
        json.loads(path.read_bytes())
    except FileNotFoundError:
        return False
    except ValueError:
        path.unlink(missing_ok=True)
        return True
    return False
