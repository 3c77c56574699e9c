"""``evalreg drift``'s report as GitHub-flavoured Markdown."""

from __future__ import annotations

from evalreg.compare.drift import CellDrift, DriftReport, ordered
from evalreg.report.governance import code, table
from evalreg.stats import wilson
from evalreg.text.escape import cell, inline
from evalreg.text.numbers import percent, percent_interval


def render_drift(report: DriftReport) -> str:
    """The report as GitHub-flavoured Markdown; provider- and PR-controlled text is escaped."""
    asked = [c for c in report.cells if c.keys]
    drifted = [c for c in asked if c.drifted]
    blocked = [c for c in report.cells if c.blocked is not None]
    out = [
        "## evalreg: model drift\n",
        f"Re-asked up to {report.sample} recorded requests a cell (seed {report.seed}) and "
        "compared each live response with the stored one. A cell drifts when the graded "
        f"levels differ on more than {percent(report.threshold)} of its compared samples, or when "
        "the provider names a different model.\n",
    ]
    if drifted:
        out.append(f"**🔻 Drift in {len(drifted)} of {_cells(len(asked))} asked.**\n")
    if blocked:
        out.append(f"**⚠ {_cells(len(blocked))} could not be checked:** see below.\n")
    if not (drifted or blocked):
        out.append(
            f"**No drift beyond the threshold in {_cells(len(asked))} asked.**\n"
            if asked
            else "**Nothing to check:** no cell with results has a hosted model.\n"
        )
    if asked:
        out.append(
            table(
                [
                    "cell",
                    "pin",
                    "compared",
                    "same text",
                    "same level",
                    "model changes",
                    "fingerprint changes",
                    "not compared",
                    "drift",
                ],
                [_row(c) for c in asked],
            )
        )
    for title, reasons in (
        ("Not checked", [(c.cell, c.blocked) for c in blocked]),
        ("Skipped", [(c.cell, c.skipped) for c in report.cells if c.skipped is not None]),
    ):
        if reasons:
            out.append(f"{title}:\n")
            out.append("".join(f"- {code(cid)}: {inline(why or '')}\n" for cid, why in reasons))
    out += [_details(c) for c in asked if c.reasons or c.errors or c.fingerprints or c.examples]
    return "\n".join(out)


def _cells(n: int) -> str:
    return f"{n} cell" + ("" if n == 1 else "s")


def _share(k: int, n: int) -> str:
    return percent_interval(k / n, *wilson(k, n)) if n else "–"


def _row(c: CellDrift) -> list[str]:
    return [
        code(c.cell),
        code(c.pin),
        f"{c.compared} of {len(c.keys)}",
        _share(c.exact, c.compared),
        _share(c.same_level, c.compared),
        str(sum(c.models.values())),
        str(sum(c.fingerprints.values())),
        str(sum(c.errors.values())),
        "🔻 drifted" if c.drifted else "no",
    ]


def _value(x: str | None) -> str:
    return "none" if x is None else code(x)


def _details(c: CellDrift) -> str:
    out = [f"### {code(c.cell)}\n"]
    lines = [f"- Drifted: {inline(r)}" for r in c.reasons]
    for title, counts in (
        ("Level changes", c.levels),
        ("Returned model", c.models),
        ("System fingerprint", c.fingerprints),
    ):
        if counts:
            shown = ", ".join(f"{_value(o)} → {_value(n)} ×{k}" for (o, n), k in ordered(counts))
            lines.append(f"- {title}: {shown}")
    if c.criteria:
        shown = ", ".join(f"{code(cid)} ×{k}" for cid, k in sorted(c.criteria.items()))
        lines.append(f"- Criteria whose verdict differs: {shown}")
    if c.errors:
        shown = ", ".join(f"{cell(kind)} ×{k}" for kind, k in sorted(c.errors.items()))
        lines.append(f"- Not compared: {shown}")
    out.append("\n".join(lines) + "\n")
    if c.examples:
        out.append(
            table(
                ["item", "sample", "stored level", "live level", "stored output", "live output"],
                [
                    [
                        code(e.item),
                        str(e.sample),
                        _value(e.stored_level),
                        _value(e.live_level),
                        cell(e.stored_text),
                        cell(e.live_text),
                    ]
                    for e in c.examples
                ],
            )
        )
    return "\n".join(out)
