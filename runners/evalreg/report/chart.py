"""Deterministic SVG charts for report pages: render on GitHub and offline, no scripts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape as _html_escape


def escape(text: str) -> str:
    """``&``, ``<`` and ``>`` escaped for SVG text (as ``xml.sax.saxutils.escape`` does,
    without importing ``urllib``)."""
    return _html_escape(text, quote=False)


@dataclass(frozen=True)
class Bar:
    label: str
    value: float | None
    """0..1, or None for a candidate with no results."""
    lo: float | None = None
    hi: float | None = None
    highlight: bool = False


def bar_chart(title: str, bars: Sequence[Bar], *, axis_label: str = "pass rate") -> str:
    """Horizontal bars with interval whiskers on a 0-100 % axis."""
    left, width, row, top = 190, 420, 30, 44
    height = top + row * len(bars) + 40
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 80}" '
        f'height="{height}" viewBox="0 0 {left + width + 80} {height}" '
        'font-family="Helvetica, Arial, sans-serif" font-size="12">',
        f"<title>{escape(title)}</title>",
        f'<rect width="{left + width + 80}" height="{height}" fill="#ffffff"/>',
        f'<text x="{left}" y="22" font-size="14" font-weight="bold">{escape(title)}</text>',
    ]
    axis_y = top + row * len(bars) + 4
    for tick in range(0, 101, 20):
        x = left + width * tick / 100
        out.append(
            f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{axis_y}" stroke="#e1e4e8"/>'
        )
        out.append(f'<text x="{x:.1f}" y="{axis_y + 16}" text-anchor="middle">{tick}%</text>')
    out.append(
        f'<text x="{left + width / 2:.1f}" y="{axis_y + 32}" text-anchor="middle" '
        f'fill="#586069">{escape(axis_label)} (whiskers: 95 % interval)</text>'
    )
    for i, bar in enumerate(bars):
        y = top + row * i
        weight = ' font-weight="bold"' if bar.highlight else ""
        label = bar.label if len(bar.label) <= 28 else bar.label[:27] + "…"
        out.append(
            f'<text x="{left - 8}" y="{y + 15}" text-anchor="end"{weight}>{escape(label)}</text>'
        )
        if bar.value is None:
            out.append(f'<text x="{left + 4}" y="{y + 15}" fill="#6a737d">pending</text>')
            continue
        fill = "#0366d6" if bar.highlight else "#8fb8e8"
        out.append(
            f'<rect x="{left}" y="{y + 4}" width="{width * bar.value:.1f}" height="16" '
            f'fill="{fill}"/>'
        )
        if bar.lo is not None and bar.hi is not None:
            x1, x2 = left + width * bar.lo, left + width * bar.hi
            out.append(
                f'<line x1="{x1:.1f}" y1="{y + 12}" x2="{x2:.1f}" y2="{y + 12}" '
                'stroke="#24292e" stroke-width="1.5"/>'
            )
            for x in (x1, x2):
                out.append(
                    f'<line x1="{x:.1f}" y1="{y + 7}" x2="{x:.1f}" y2="{y + 17}" '
                    'stroke="#24292e" stroke-width="1.5"/>'
                )
        out.append(f'<text x="{left + width + 8}" y="{y + 15}">{100 * bar.value:.1f}%</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
