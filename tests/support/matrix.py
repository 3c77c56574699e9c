"""Test matrices split between the README's test command and nox's ``slow`` session.

A matrix of kill points (every moment of a run, every stage of a purge) times signals is
what proves a writing command safe, and it is long: each case starts real processes,
signals them and resumes. The README's command runs a cross-section of it, every row and
every column at least once; the rest of the matrix is marked ``slow``, and CI runs it in
the ``slow`` session, so every case still runs on every change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

SLOW = pytest.mark.slow


def cross_section(
    rows: Sequence[Any], columns: Sequence[Any], *, ids: Callable[[Any, Any], str]
) -> list[Any]:
    """Every (row, column) pair as a ``pytest.param``; row ``i`` with column ``i mod
    len(columns)`` (and every column, when there are more columns than rows) runs in the
    README's command, every other pair is marked ``slow``."""
    kept = {(i, i % len(columns)) for i in range(len(rows))}
    kept |= {(j % len(rows), j) for j in range(len(columns))}
    return [
        pytest.param(row, column, id=ids(row, column), marks=() if (i, j) in kept else (SLOW,))
        for i, row in enumerate(rows)
        for j, column in enumerate(columns)
    ]


def every_nth(cases: Sequence[Any], n: int, *, ids: Callable[[Any], str]) -> list[Any]:
    """``cases`` as ``pytest.param``s: the first and every ``n``-th after it run in the
    README's command, the others are marked ``slow``."""
    return [
        pytest.param(case, id=ids(case), marks=() if i % n == 0 else (SLOW,))
        for i, case in enumerate(cases)
    ]
