"""``evalreg run``'s closing ``dvc add`` (and push), in a child process started early.

A run ends by tracking what it wrote: new store segments and items files. Importing DVC,
opening the repository and collecting its stages cost the better part of a second of
CPU, which the run's own process, busy with requests and grading, cannot spare. A
``Tracker`` starts the child before the fetch. The child does that work on another core,
holding the repository's lock so that the stages it collected stay valid, then waits for
the paths to track. Closing a ``Tracker`` that was never asked dismisses the child: at
any point of its preparation it releases the lock and exits, having changed nothing.

The child ignores the signals that end a run (SIGINT, SIGTERM, SIGHUP go to the whole
process group): its parent decides when to stop, and a ``dvc add`` is never cut in half
by a Ctrl-C. It is dismissed with SIGUSR1 instead, and exits when its stdin closes.

Protocol, one JSON object a line: the parent sends ``{"add": [paths]}`` (relative to the
root) and reads ``{"error": str | null}``; then, optionally, ``{"push": [paths]}`` and
reads ``{"push_error": str | null}``. End of input ends the child.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, Any, NoReturn

from evalreg.errors import EvalregError, UsageError

DISMISS = signal.SIGUSR1


def start_child(root: Path, lock_fd: int | None) -> subprocess.Popen[bytes] | None:
    """The DVC child for ``root``; None when no process can be started, and the work is
    done in the calling process instead (``Tracker``'s fallback)."""
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "evalreg.runner._dvcworker", str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=() if lock_fd is None else (lock_fd,),
        )
    except OSError:
        return None


class Tracker:
    """A DVC child process for one repository: ``add`` once, then ``push`` or ``close``.

    ``lock_fd`` is the repository lock's descriptor (``lock.RepositoryLock.fd``): the
    child inherits it, so the lock stays held while the child may still be writing.
    """

    def __init__(self, root: Path, *, lock_fd: int | None = None) -> None:
        self.root = root
        self.proc = start_child(root, lock_fd)
        self.asked = False

    def _ask(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """Send one request and read its reply; None if the child is gone."""
        proc = self.proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            return None
        self.asked = True
        try:
            proc.stdin.write(json.dumps(request).encode() + b"\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
            reply = json.loads(line) if line else None
        except (OSError, ValueError):
            reply = None
        return reply if isinstance(reply, dict) else None

    def add(self, paths: list[str]) -> None:
        """``dvc add`` the paths; a failure is an error naming what could not be tracked."""
        reply = self._ask({"add": paths})
        if reply is None:
            # No child (or it died): do it here, where an error is seen directly.
            from evalreg import dvcrepo

            try:
                dvcrepo.track(self.root, paths, push=False)
            except Exception as exc:
                raise UsageError(f"DVC could not track {', '.join(paths)}: {exc}") from None
            return
        if reply.get("error"):
            raise UsageError(f"DVC could not track {', '.join(paths)}: {reply['error']}")

    def push(self, paths: list[str]) -> str | None:
        """Push tracked paths to the default remote; return why it failed, or None.

        A failed push loses nothing (the data is in the local cache)."""
        reply = self._ask({"push": paths})
        if reply is None:
            from evalreg import dvcrepo

            return dvcrepo.push(self.root, paths)
        push_error = reply.get("push_error")
        return push_error if isinstance(push_error, str) else None

    def release(self) -> None:
        """After ``add``, when no push follows: the child exits now, while the caller
        finishes its closing step (``close`` reaps it; a ``push`` after this is done
        here)."""
        proc = self.proc
        if proc is None or proc.stdin is None or not self.asked:
            return
        with contextlib.suppress(OSError):
            proc.stdin.close()  # the end of its input: the child exits
        proc.stdin = None

    def close(self) -> None:
        """End the child: dismissed at once if it was never asked (it releases the
        repository's lock and exits, having changed nothing), else once its current
        request is done."""
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        try:
            if not self.asked:
                proc.send_signal(DISMISS)
            proc.communicate(timeout=120)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_BUSY = "busy"
"""``_add`` in the prepared repository met a path DVC's lock table gives to another
process: done again in a fresh one, which waits for it (``dvcrepo.with_repo``)."""


def _add(root: Path, paths: list[str], repo: Any) -> str | None:
    """``dvc add`` in the prepared repository (or a fresh one); why it failed, or None."""
    from dvc.lock import LockError

    from evalreg import dvcrepo

    try:
        if repo is None:
            dvcrepo.track(root, paths, push=False)
        else:
            with dvcrepo.quiet():
                dvcrepo.add(repo, root, paths)
    except LockError:
        return _BUSY
    except EvalregError as exc:
        return str(exc)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


class _Dismissed(BaseException):
    """SIGUSR1: the run needs nothing tracked. Raised wherever the child is, it unwinds
    the ``with`` blocks, which release the repository's lock."""


def _dismiss(signum: int, frame: object) -> NoReturn:
    raise _Dismissed


def main(argv: list[str]) -> NoReturn:
    # First: the run's parent decides when to stop; a dismissal that arrives before the
    # lock is taken only ends the process.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    signal.signal(DISMISS, _dismiss)
    with contextlib.suppress(_Dismissed, BrokenPipeError):
        _serve(Path(argv[0]))
    with contextlib.suppress(OSError):
        sys.stderr.flush()
    # Done, and nothing is left open: skip the interpreter's teardown of all of DVC,
    # which would keep the run waiting for a few tenths of a second.
    os._exit(0)


def _request(stdin: IO[bytes], verb: str) -> list[str] | None:
    line = stdin.readline()
    if not line.strip():
        return None
    ask = json.loads(line)
    paths = ask.get(verb) if isinstance(ask, dict) else None
    return [str(p) for p in paths] if isinstance(paths, list) else None


def _serve(root: Path) -> None:
    from evalreg import dvclock, dvcrepo

    # The replies are this process's only output: whatever DVC might print goes nowhere.
    reply_to = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    stdin = sys.stdin.buffer
    with contextlib.ExitStack() as held:
        repo = None
        try:
            with dvcrepo.quiet():
                from dvc.repo import Repo

                repo = Repo(str(root))
                held.callback(repo.close)
                held.enter_context(dvclock.holding_lock(repo))
                repo.index.outs_graph  # noqa: B018 (collects every stage: the costly part)
        except Exception:
            # Someone else holds the lock, or the repository is odd: track the plain
            # way when asked, and report what that says.
            held.close()
            repo = None
        paths = _request(stdin, "add")
        if paths is None:
            return
        # Asked: from here on the add runs to its end.
        signal.signal(DISMISS, signal.SIG_IGN)
        error = _add(root, paths, repo)
    if error == _BUSY:
        error = _add(root, paths, None)
    reply_to.write(json.dumps({"error": error}) + "\n")
    reply_to.flush()
    # The lock is released: a push takes it again, with the new stages in its index.
    signal.signal(DISMISS, _dismiss)
    paths = _request(stdin, "push")
    if paths is not None:
        reply_to.write(json.dumps({"push_error": dvcrepo.push(root, paths)}) + "\n")
        reply_to.flush()
    reply_to.close()


if __name__ == "__main__":
    main(sys.argv[1:])
