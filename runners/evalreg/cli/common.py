"""What every command group shares: where the registry is, paths given on the command
line, the repository lock, notes on stderr and documents on stdout.

Imports only the standard library at the top: every group module imports this one to
build the parser, and ``evalreg --help`` must stay fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from evalreg.errors import UsageError

if TYPE_CHECKING:
    from evalreg.store.lock import RepositoryLock

Handler = Callable[[argparse.Namespace], int]
"""A command: its parsed arguments in, its exit status out."""


def find_root(start: Path) -> Path:
    """The repository root: the nearest ancestor holding ``.git`` or ``registry/``."""
    start = start.resolve()
    for candidate in (start, *start.parents):
        if (candidate / ".git").exists() or (candidate / "registry").is_dir():
            return candidate
    return start


def working_root(args: argparse.Namespace) -> Path:
    """Where a command works: ``-C DIR``, else the repository root above the current
    directory."""
    if args.directory is not None:
        path = Path(args.directory)
        if not path.is_dir():
            raise UsageError(f"-C {args.directory}: no such directory")
        return path.resolve()
    return find_root(Path.cwd())


def given_path(args: argparse.Namespace, name: str) -> Path:
    """A path from the command line: with ``-C DIR`` a relative one is read from DIR, as
    ``git -C`` does for every path."""
    path = Path(name)
    if args.directory is not None and not path.is_absolute():
        return Path(args.directory) / path
    return path


def registry_root(args: argparse.Namespace, rev: str | None = None) -> Path:
    """``working_root``, refused (exit 2) unless it holds a registry: ``find_root`` stops at any
    git repository, and ``-C`` takes any directory. With ``rev``, the registry read is the
    one of that revision, which must hold one (the working tree need not)."""
    root = working_root(args)
    held = (root / "registry").is_dir()
    where = ""
    if rev is not None:
        from evalreg.registry.tree import GitTree

        try:
            held = GitTree(root, rev).is_dir("registry")
        except UsageError:
            pass  # no git repository, or no such revision: in a registry, the command says so
        else:
            where = f" at {rev}"
    if not held:
        raise UsageError(
            f"{root}: not an evalreg registry{where} (no registry/ directory); "
            "`evalreg init DIR` creates one"
        )
    return root


def note(text: str) -> None:
    from evalreg.report.terminal import plain

    # Notes quote what files say (the lock names the command line of its holder).
    sys.stderr.write(plain(f"evalreg: note: {text}") + "\n")


def writing(root: Path) -> RepositoryLock:
    """Take the repository lock for a command that writes (``LockedError`` names the
    holder when another process has it), after repairing any interrupted run."""
    from evalreg.store.lock import RepositoryLock
    from evalreg.store.recovery import recover_locked

    lock = RepositoryLock(root).acquire()
    try:
        repaired = recover_locked(root)
    except BaseException:
        lock.release()
        raise
    for done in repaired:
        note(done.describe())
    return lock


def repaired(root: Path, *, quiet_if_live: bool = False) -> Path:
    """For a command that only reads: repair an interrupted run first, unless one is live
    (which is said, unless ``quiet_if_live``: the command says so itself)."""
    from evalreg.store.journal import Recovery
    from evalreg.store.recovery import recover

    for done in recover(root):
        live = isinstance(done, Recovery) and done.action == "in progress"
        if not (quiet_if_live and live):
            note(done.describe())
    return root


def emit(text: str, output: str | None = None) -> None:
    """Write a command's document (Markdown or JSON) to ``output`` or stdout, through
    ``render.plain``: documents quote model output, item text and provider errors."""
    from evalreg.report.terminal import plain

    text = plain(text)
    if output:
        Path(output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


class Commands(Protocol):
    """Where a group adds its commands: what ``add_subparsers`` returns (its class is
    private to argparse), as far as the groups use it."""

    def add_parser(self, name: str, *, help: str | None = ...) -> argparse.ArgumentParser: ...
