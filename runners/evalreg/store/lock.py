"""One writer at a time per repository: an advisory lock that names its holder.

Every command that writes results, store segments or registry files holds it for as
long as it writes. The lock is ``flock`` on a file in the repository's common git
directory (outside the working tree, so taking it changes nothing a commit could see, and
one for all the repository's worktrees: two of them running at once would each buy every
response, since neither sees the other's store); the kernel
releases it when the holder dies, however it dies, so a killed run never leaves a stale
lock behind. The file's content says who holds it, for the message the next writer sees.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from evalreg.errors import EvalregError

LOCK_NAME = "lock"


@dataclass(frozen=True)
class Holder:
    """The process holding the lock, as it wrote itself down when it took it."""

    pid: int | None = None
    host: str | None = None
    command: str | None = None
    started: str | None = None
    """When it took the lock, in UTC (``2026-01-02 03:04:05 UTC``)."""
    worktree: str | None = None
    """The working tree it writes to (one repository may have several)."""

    @classmethod
    def parse(cls, text: str) -> Holder:
        """What the lock file says (anything unreadable in it is left unknown)."""
        try:
            info = json.loads(text)
        except ValueError:
            return cls()
        if not isinstance(info, dict):
            return cls()
        pid = info.get("pid")
        fields = [info.get(name) for name in ("host", "command", "started", "worktree")]
        return cls(
            pid if isinstance(pid, int) else None,
            *(value if isinstance(value, str) else None for value in fields),
        )

    def describe(self) -> str:
        """``pid 4242 on ci-7, `evalreg run`, started 2026-01-02 03:04:05 UTC``."""
        if self.pid is None:
            return "another evalreg process"
        parts = [f"pid {self.pid}" + (f" on {self.host}" if self.host else "")]
        if self.command:
            parts.append(f"`{self.command}`")
        if self.started:
            parts.append(f"started {self.started}")
        return ", ".join(parts)

    def elsewhere(self, root: Path) -> bool:
        """It writes to another worktree of the repository than ``root``."""
        return self.worktree is not None and Path(self.worktree) != root.resolve()


class LockedError(EvalregError):
    """Another evalreg process is writing to this repository (exit 2)."""

    def __init__(self, message: str, holder: Holder | None = None) -> None:
        super().__init__(message)
        self.holder = holder or Holder()


def state_dir(root: Path) -> Path:
    """Where evalreg keeps its per-clone state (the lock, the run journal): inside the
    git directory when there is one (a worktree's own), else ``.evalreg/`` at the root."""
    dot_git = root / ".git"
    if dot_git.is_dir():
        return dot_git / "evalreg"
    if dot_git.is_file():
        # A linked worktree or a submodule: ".git" is a file naming the real directory.
        text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
        if text.startswith("gitdir:"):
            gitdir = Path(text[len("gitdir:") :].strip())
            return (gitdir if gitdir.is_absolute() else root / gitdir) / "evalreg"
    return root / ".evalreg"


def lock_dir(root: Path) -> Path:
    """Where the lock is: the state directory of the repository's main worktree, which
    every linked worktree shares (git's ``commondir``); else ``state_dir(root)``."""
    state = state_dir(root)
    common = state.parent / "commondir"
    if state.parent.name != ".git" and common.is_file():
        text = common.read_text(encoding="utf-8", errors="replace").strip()
        if text:
            shared = Path(text)
            return (
                shared if shared.is_absolute() else state.parent / shared
            ).resolve() / state.name
    return state


class RepositoryLock:
    """Held from ``acquire`` (or ``with``) until ``release``; raises ``LockedError`` at once
    when another process holds it, naming that process.

    ``fd`` may be passed to a child process (``pass_fds``): the lock then stays held until
    the child has exited too, so a helper that outlives a killed parent still excludes
    the next writer until it is done.
    """

    def __init__(self, root: Path, *, command: str | None = None) -> None:
        self.path = lock_dir(root) / LOCK_NAME
        self.root = root
        self.command = command or "evalreg " + " ".join(sys.argv[1:])
        self.fd = -1

    def acquire(self) -> RepositoryLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _written(fd)
            os.close(fd)
            where = f" in its worktree {holder.worktree}" if holder.elsewhere(self.root) else ""
            raise LockedError(
                f"another evalreg process is writing to this repository ({holder.describe()})"
                f"{where}; wait for it to finish, or stop it (the lock is {self.path})",
                holder,
            ) from None
        except BaseException:
            os.close(fd)
            raise
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": self.command,
            "started": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
            "worktree": str(self.root.resolve()),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # the flock goes with the last descriptor (a child's too)
            self.fd = -1

    def __enter__(self) -> RepositoryLock:
        return self if self.fd >= 0 else self.acquire()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def _written(fd: int) -> Holder:
    return Holder.parse(os.pread(fd, 4096, 0).decode("utf-8", errors="replace"))


def holder(root: Path) -> Holder | None:
    """Who holds the lock now; None when nobody does (its file may still name the last
    holder, which has ended). Asked without taking the lock or writing anything, for
    commands that only read."""
    try:
        fd = os.open(lock_dir(root) / LOCK_NAME, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        # A shared lock is refused only while a writer holds the exclusive one.
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _written(fd)
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
