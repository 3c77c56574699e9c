"""Deterministic SVG charts for report pages: render on GitHub and offline, no scripts.

Same data, same bytes: coordinates are written with one decimal, nothing depends on the
clock, the locale or the fonts installed. Labels are escaped for SVG text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape as _html_escape

from evalreg.text.numbers import number, percent

FONT = 'font-family="Helvetica, Arial, sans-serif" font-size="12"'
_LEFT, _WIDTH, _ROW = 190, 420, 30
_LABEL_CHARS = 28


def escape(text: str) -> str:
    """``&``, ``<``, ``>`` and quotes escaped for SVG text and attributes (as
    ``xml.sax.saxutils.escape`` does, without importing ``urllib``)."""
    return _html_escape(text, quote=True)


@dataclass(frozen=True)
class Bar:
    label: str
    value: float | None
    """On the panel's scale (0..1 for a rate), or None for a candidate with no results."""
    lo: float | None = None
    hi: float | None = None
    highlight: bool = False


@dataclass(frozen=True)
class Threshold:
    """A gate's bound drawn across a panel: ``≥ 0.85`` (``minimum``) or ``≤ 0.15``."""

    value: float
    label: str
    minimum: bool
    on: str = "point"
    """What is compared with it: ``point``, ``lower_bound`` (a bar's ``lo``) or
    ``upper_bound`` (its ``hi``)."""

    def fails(self, bar: Bar) -> bool:
        compared = {"lower_bound": bar.lo, "upper_bound": bar.hi}.get(self.on, bar.value)
        if compared is None:
            compared = bar.value
        assert compared is not None
        return compared < self.value if self.minimum else compared > self.value


@dataclass(frozen=True)
class Panel:
    title: str
    bars: Sequence[Bar]
    threshold: Threshold | None = None
    rate: bool = True
    """A share on a 0-100 % axis; otherwise a number on an axis up to the largest value."""


def panel_chart(title: str, panels: Sequence[Panel]) -> str:
    """Small multiples: one horizontal bar panel per metric, stacked, each with interval
    whiskers and, for a gate, its threshold as a dashed line (a bar is red where what the
    gate compares, its value or a bound, is on the wrong side of it)."""
    width = _LEFT + _WIDTH + 80
    body: list[str] = []
    y = 44
    for panel in panels:
        body += _panel(panel, y)
        y += _panel_height(panel)
    height = y
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" {FONT}>',
        f"<title>{escape(title)}</title>",
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{_LEFT}" y="22" font-size="14" font-weight="bold">{escape(title)}</text>',
        *body,
        "</svg>",
    ]
    return "\n".join(out) + "\n"


def _panel_height(panel: Panel) -> int:
    return 22 + _ROW * len(panel.bars) + (60 if panel.threshold is not None else 44)


def _scale(panel: Panel) -> float:
    if panel.rate:
        return 1.0
    values = [v for b in panel.bars for v in (b.value, b.hi) if v is not None]
    if panel.threshold is not None:
        values.append(panel.threshold.value)
    top = max(values, default=0.0) * 1.1
    return top if top > 0 else 1.0


def _x(value: float, scale: float) -> float:
    return _LEFT + _WIDTH * min(max(value / scale, 0.0), 1.0)


def _tick(value: float, panel: Panel) -> str:
    return percent(value, 0) if panel.rate else number(value)


def _panel(panel: Panel, top: int) -> list[str]:
    scale = _scale(panel)
    out = [f'<text x="{_LEFT}" y="{top + 4}" font-weight="bold">{escape(panel.title)}</text>']
    first = top + 14
    axis_y = first + _ROW * len(panel.bars) + 4
    for step in range(6):
        value = scale * step / 5
        x = _x(value, scale)
        out.append(
            f'<line x1="{x:.1f}" y1="{first - 4}" x2="{x:.1f}" y2="{axis_y}" stroke="#e1e4e8"/>'
        )
        out.append(
            f'<text x="{x:.1f}" y="{axis_y + 16}" text-anchor="middle" fill="#586069">'
            f"{escape(_tick(value, panel))}</text>"
        )
    gate = panel.threshold
    for i, bar in enumerate(panel.bars):
        out += _bar(bar, first + _ROW * i, scale, gate)
    if gate is not None:
        x = _x(gate.value, scale)
        out.append(
            f'<line x1="{x:.1f}" y1="{first - 6}" x2="{x:.1f}" y2="{axis_y}" '
            'stroke="#cf222e" stroke-width="1.5" stroke-dasharray="5,3"/>'
        )
        out.append(
            f'<text x="{x:.1f}" y="{axis_y + 30}" text-anchor="middle" fill="#cf222e">'
            f"{escape(gate.label)}</text>"
        )
    return out


def _bar(bar: Bar, y: int, scale: float, gate: Threshold | None) -> list[str]:
    weight = ' font-weight="bold"' if bar.highlight else ""
    label = bar.label if len(bar.label) <= _LABEL_CHARS else bar.label[: _LABEL_CHARS - 1] + "…"
    out = [f'<text x="{_LEFT - 8}" y="{y + 15}" text-anchor="end"{weight}>{escape(label)}</text>']
    if bar.value is None:
        out.append(f'<text x="{_LEFT + 4}" y="{y + 15}" fill="#6a737d">pending</text>')
        return out
    wrong = gate is not None and (
        bar.value < gate.value if gate.minimum else bar.value > gate.value
    )
    fill = "#cf222e" if wrong else ("#0366d6" if bar.highlight else "#8fb8e8")
    out.append(
        f'<rect x="{_LEFT}" y="{y + 4}" width="{_x(bar.value, scale) - _LEFT:.1f}" height="16" '
        f'fill="{fill}"/>'
    )
    if bar.lo is not None and bar.hi is not None:
        x1, x2 = _x(bar.lo, scale), _x(bar.hi, scale)
        out.append(
            f'<line x1="{x1:.1f}" y1="{y + 12}" x2="{x2:.1f}" y2="{y + 12}" '
            'stroke="#24292e" stroke-width="1.5"/>'
        )
        for x in (x1, x2):
            out.append(
                f'<line x1="{x:.1f}" y1="{y + 7}" x2="{x:.1f}" y2="{y + 17}" '
                'stroke="#24292e" stroke-width="1.5"/>'
            )
    shown = percent(bar.value) if scale == 1.0 and bar.value <= 1.0 else number(bar.value)
    out.append(f'<text x="{_LEFT + _WIDTH + 8}" y="{y + 15}">{escape(shown)}</text>')
    return out


@dataclass(frozen=True)
class HeatCell:
    value: float | None
    """A share, 0..1; None: no graded item."""
    n: int = 0


def heatmap(
    title: str,
    rows: Sequence[str],
    columns: Sequence[str],
    cells: Sequence[Sequence[HeatCell]],
    *,
    highlight: str | None = None,
) -> str:
    """A grid of rows by columns of shares, each cell shaded by its value (white 0 % to blue
    100 %) and labelled with it; ``cells[r][c]`` is row ``r``'s value for column ``c``. The
    ``highlight`` column's name is bold."""
    left, top, cw, rh = 170, 118, 92, 24
    width = max(left + cw * len(columns) + 20, 480)
    height = top + rh * len(rows) + 30
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" {FONT}>',
        f"<title>{escape(title)}</title>",
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="10" y="22" font-size="14" font-weight="bold">{escape(title)}</text>',
    ]
    for c, name in enumerate(columns):
        x = left + cw * c + cw / 2
        label = name if len(name) <= 18 else name[:17] + "…"
        weight = ' font-weight="bold"' if name == highlight else ""
        out.append(
            f'<text transform="translate({x:.1f},{top - 8}) rotate(-35)" '
            f'text-anchor="start"{weight}>{escape(label)}</text>'
        )
    for r, row in enumerate(rows):
        y = top + rh * r
        label = row if len(row) <= 24 else row[:23] + "…"
        out.append(f'<text x="{left - 8}" y="{y + 16}" text-anchor="end">{escape(label)}</text>')
        for c, value in enumerate(cells[r]):
            x = left + cw * c
            out += _heat_cell(value, x, y, cw, rh)
    out.append(
        f'<text x="10" y="{height - 10}" fill="#586069">Shade: pass rate, white 0 % to dark '
        "blue 100 %; a dash: no graded item.</text>"
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _heat_cell(cell: HeatCell, x: int, y: int, w: int, h: int) -> list[str]:
    if cell.value is None:
        return [
            f'<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="#f6f8fa" stroke="#d1d9e0"/>',
            f'<text x="{x + w / 2:.1f}" y="{y + 16}" text-anchor="middle" fill="#6a737d">–</text>',
        ]
    share = min(max(cell.value, 0.0), 1.0)
    # From white to #0550ae; text turns white where the shade gets dark.
    red, green, blue = (round(255 + (end - 255) * share) for end in (5, 80, 174))
    ink = "#ffffff" if share > 0.55 else "#1f2328"
    return [
        f'<rect x="{x}" y="{y}" width="{w}" height="{h}" '
        f'fill="#{red:02x}{green:02x}{blue:02x}" stroke="#d1d9e0"/>',
        f'<text x="{x + w / 2:.1f}" y="{y + 16}" text-anchor="middle" fill="{ink}">'
        f"{escape(percent(share))}</text>",
    ]
