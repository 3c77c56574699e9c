"""CPU-bound work split across forked processes: part 0 here, the others in workers.

Planning and re-grading a large cell are CPU-bound Python. Forked workers inherit
everything loaded so far (registry, store, graders), so only a part's index is sent to
them and only its result comes back. Forking is used on Linux only; elsewhere, and for
short work, the caller does it all.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

MIN_PART = 10_000
"""Units (samples, requests) a worker must get to be worth its fork and the transfer of
its result."""

_TASK: Callable[[int], Any] | None = None
"""The work of part ``i``, inherited by forked workers."""


def parts(units: int, min_part: int = MIN_PART) -> int:
    """Into how many parts ``units`` of work are split (1: the caller does it all)."""
    if sys.platform != "linux":
        return 1
    cpus = len(os.sched_getaffinity(0))
    return max(1, min(cpus, units // min_part))


def _run(index: int) -> Any:
    assert _TASK is not None, "workers are forked with their work"
    return _TASK(index)


@contextlib.contextmanager
def forked(task: Callable[[int], T], count: int) -> Iterator[Callable[[int], T]]:
    """Start ``task(1)`` … ``task(count - 1)`` in forked workers; yield ``result(i)``,
    which waits for part ``i``'s. Part 0 is the caller's to do, meanwhile."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    global _TASK
    _TASK = task
    # Output still buffered here would be written again by every forked worker.
    sys.stdout.flush()
    sys.stderr.flush()
    # Everything alive now is the workers' inheritance: frozen, their collections do not
    # walk it (which would also copy every page it touches).
    gc.freeze()
    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=max(1, count - 1), mp_context=context) as pool:
            futures = {i: pool.submit(_run, i) for i in range(1, count)}
            gc.unfreeze()
            yield lambda i: futures[i].result()
    finally:
        gc.unfreeze()
        _TASK = None
