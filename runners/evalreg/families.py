"""The families paired comparisons are tested in, and how a reader is told about them.

Light on purpose (standard library only): the diff's Markdown renderer, imported by the
CLI at start-up, states the families too.
"""

from __future__ import annotations

#: Slices with fewer paired items than this are shown but not tested (nor, in the
#: governance report, listed): too small to tell anything.
MIN_SLICE_ITEMS = 10

PRIMARY = "primary"
"""The comparison of two candidates on all their items: one test at the stated level."""
SLICES = "slices"
"""Slices with at least ``MIN_SLICE_ITEMS`` items: one Holm family of their own."""
UNTESTED = "untested"
"""Slices below ``MIN_SLICE_ITEMS``: shown, not tested."""

TOO_SMALL_TO_TEST = "too small to test"
NONE_DETECTABLE = "too few items to detect any difference"


def family_sentence(confidence: float = 0.95) -> str:
    """The families the comparisons are tested in, in one sentence for a reader."""
    alpha = 1 - confidence
    return (
        f"The comparison on all items is the primary test, at α = {alpha:.2g} on its own; "
        f"slices with at least {MIN_SLICE_ITEMS} items form a separate Holm-corrected "
        "family (each interval is at the level Holm tested its slice at, so it excludes 0 "
        f"exactly when the verdict is better or worse); smaller slices are shown, not tested."
    )


def holm_levels(pvalues: dict[str, float], alpha: float) -> dict[str, float]:
    """The level Holm's step-down procedure tests each hypothesis at (see ``metrics.verdicts``);
    ties are ordered by key as :func:`stats.holm` orders them."""
    ordered = sorted(pvalues.items(), key=lambda item: (item[1], item[0]))
    m, levels = len(ordered), {}
    stopped: float | None = None
    for index, (key, p) in enumerate(ordered):
        level = alpha / (m - index)
        if stopped is None and not p < level:
            stopped = level
        levels[key] = level if stopped is None else stopped
    return levels
