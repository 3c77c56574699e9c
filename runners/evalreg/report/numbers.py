"""How numbers are written wherever evalreg shows them: the one formatter of counts,
shares, money and coverage (free of heavy imports: the terminal, the pull-request comment and
gate messages print them too)."""

from __future__ import annotations


def coverage_text(graded: int, applicable: int) -> str:
    """Coverage as every report shows it: ``graded/applicable (pct)``."""
    share = 100 * graded / applicable if applicable else 0.0
    return f"{graded}/{applicable} ({share:.1f}%)"
