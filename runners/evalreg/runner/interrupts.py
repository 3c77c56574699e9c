"""Signals that end a command: Ctrl-C, a cancelled CI job, a container stop, a closed terminal.

SIGINT, SIGTERM and SIGHUP all unwind a writing command the same way (as
``KeyboardInterrupt``, so ``finally`` blocks and context managers run), and a step that
must not be cut in half, such as putting a run's results in place, defers them until it
is done. SIGKILL cannot be caught: the run journal is what repairs that.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

ENDING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_received: list[int] = []


def received() -> int:
    """The ending signal that arrived last (SIGINT if none did: a plain KeyboardInterrupt)."""
    return _received[-1] if _received else signal.SIGINT


def _as_sigint(signum: int, frame: FrameType | None) -> None:
    """Handle SIGTERM and SIGHUP as whatever handles SIGINT now: Python's default raises
    ``KeyboardInterrupt``; inside ``asyncio.run`` the loop's own handler cancels the main
    task, so every task unwinds through its ``finally`` blocks."""
    _received.append(signum)
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)
    else:
        raise KeyboardInterrupt


@contextlib.contextmanager
def unwinding() -> Iterator[None]:
    """Inside the block, SIGTERM and SIGHUP unwind the program as Ctrl-C does (their
    default would end the process on the spot)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _as_sigint) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Ending signals that arrive inside the block are held until it ends, then raised
    as ``KeyboardInterrupt``: the block runs to its end (a SIGKILL still stops it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        arrived.append(signum)

    previous = {s: signal.signal(s, hold) for s in ENDING}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if arrived:
        _received.append(arrived[0])
        raise KeyboardInterrupt
