"""``evalreg run``'s closing ``dvc add`` (and push), in a child process started early.

A run ends by tracking what it wrote: new store segments and items files. Importing DVC,
opening the repository and collecting its stages cost the better part of a second of
CPU, which the run's own process, busy with requests and grading, cannot spare. A
``Tracker`` starts the child before the fetch. The child does that work on another core,
holding the repository's lock so that the stages it collected stay valid, then waits for
the paths to track. Closing a ``Tracker`` that was never asked dismisses the child: at
any point of its preparation it releases the lock and exits, having changed nothing.

Protocol: one JSON object on the child's stdin, ``{"add": [paths], "push": bool}``
(relative to the root; an empty stdin means nothing to do), and one on its stdout,
``{"error": str | null, "push_error": str | null}``.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, NoReturn

from evalreg.errors import UsageError


class Tracker:
    """A DVC child process for one repository; ``track`` once, or ``close``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.proc: subprocess.Popen[bytes] | None = None
        # With no process to spare, ``track`` works in this process instead.
        with contextlib.suppress(OSError):
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "evalreg.dvcworker", str(root)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )

    def track(self, paths: list[str], *, push: bool) -> str | None:
        """``dvc add`` the paths, then push them if asked; return why the push failed.

        A failed push loses nothing (the data is in the local cache); a failed add is an
        error naming what could not be tracked.
        """
        if self.proc is None:
            from evalreg import dvcrepo

            try:
                dvcrepo.track(self.root, paths, push=False)
            except Exception as exc:
                raise UsageError(f"DVC could not track {', '.join(paths)}: {exc}") from None
            return dvcrepo.push(self.root, paths) if push else None
        request = json.dumps({"add": paths, "push": push}).encode()
        out, err = self.proc.communicate(request)
        try:
            reply = json.loads(out)
        except ValueError:
            lines = err.decode(errors="replace").strip().splitlines()
            reply = {"error": lines[-1] if lines else f"exit status {self.proc.returncode}"}
        if reply.get("error"):
            raise UsageError(f"DVC could not track {', '.join(paths)}: {reply['error']}")
        push_error = reply.get("push_error")
        return push_error if isinstance(push_error, str) else None

    def close(self) -> None:
        """Dismiss the child if it was never asked, without waiting for its preparation
        to end: it releases the repository's lock and exits, having changed nothing."""
        if self.proc is not None and self.proc.returncode is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.communicate(timeout=60)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_AHEAD = (
    "dvc.repo.add",
    "dvc.output",
    "dulwich.index",
    "pygit2",
    "scmrepo.git.backend.dulwich",
    "scmrepo.git.backend.pygit2",
    "rich.status",
)
"""Modules ``dvc add`` imports as it goes (staging in git, its status line)."""


def _import_ahead() -> None:
    from dvc.ui import ui

    for name in _AHEAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    ui.error_console  # noqa: B018 (a rich console, built once)


def _add(root: Path, paths: list[str], repo: Any) -> str | None:
    """``dvc add`` in the prepared repository (or a fresh one); why it failed, or None."""
    from evalreg import dvcrepo

    try:
        if repo is None:
            dvcrepo.track(root, paths, push=False)
        else:
            with dvcrepo.quiet():
                repo.add([str(root / p) for p in paths])
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


class _Dismissed(BaseException):
    """SIGTERM: the run needs nothing tracked. Raised wherever the child is, it unwinds
    the ``with`` blocks, which release the repository's lock."""


def _dismiss(signum: int, frame: object) -> NoReturn:
    raise _Dismissed


def main(argv: list[str]) -> NoReturn:
    # First: a dismissal that arrives before the lock is taken only ends the process.
    signal.signal(signal.SIGTERM, _dismiss)
    with contextlib.suppress(_Dismissed):
        _serve(Path(argv[0]))
    sys.stderr.flush()
    # Done, and nothing is left open: skip the interpreter's teardown of all of DVC,
    # which would keep the run waiting for a few tenths of a second.
    os._exit(0)


def _serve(root: Path) -> None:
    from evalreg import dvcrepo

    # The reply is this process's only output: whatever DVC might print goes nowhere.
    reply_to = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    with contextlib.ExitStack() as held:
        repo = None
        try:
            with dvcrepo.quiet():
                from dvc.repo import Repo, lock_repo

                repo = Repo(str(root))
                held.callback(repo.close)
                held.enter_context(lock_repo(repo))
                repo.index.outs_graph  # noqa: B018 (collects every stage: the costly part)
                _import_ahead()
        except Exception:
            # Someone else holds the lock, or the repository is odd: track the plain
            # way when asked, and report what that says.
            held.close()
            repo = None
        request = sys.stdin.buffer.read()
        ask = json.loads(request) if request.strip() else None
        error = _add(root, ask["add"], repo) if ask is not None else None
    if ask is not None:
        # The lock is released: a push takes it again, with the new stages in its index.
        push = ask["push"] and error is None
        push_error = dvcrepo.push(root, ask["add"]) if push else None
        reply_to.write(json.dumps({"error": error, "push_error": push_error}))
    reply_to.close()


if __name__ == "__main__":
    main(sys.argv[1:])
