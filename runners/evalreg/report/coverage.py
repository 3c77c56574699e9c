"""How the coverage of human grades is written wherever it is shown (kept free of heavy
imports: the terminal and the pull-request comment print it too)."""

from __future__ import annotations


def coverage_text(graded: int, applicable: int) -> str:
    """Coverage as every report shows it: ``graded/applicable (pct)``."""
    share = 100 * graded / applicable if applicable else 0.0
    return f"{graded}/{applicable} ({share:.1f}%)"
