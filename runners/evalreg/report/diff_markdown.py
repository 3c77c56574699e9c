"""Render an ``evalreg diff`` (its JSON data) as Markdown for a PR comment or a job summary.

Everything in the data is treated as untrusted — it may come from an artifact made by a
pull request's own job — so every string is escaped and every number re-formatted here.
The result always fits GitHub's comment limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalreg.report.escape import COMMENT_LIMIT, cell, cut_to_fit, inline

RESERVED = 200
"""Room left for the sticky marker and a cut note."""


def _num(x: Any, digits: int = 1, scale: float = 100.0, unit: str = "%") -> str:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return "–"
    return f"{scale * float(x):.{digits}f}{unit}"


def _pts(x: Any) -> str:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return "–"
    return f"{100 * float(x):+.1f} pts"


def _money(x: Any) -> str:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return "–"
    return f"${float(x):.6f}".rstrip("0").rstrip(".") if abs(x) < 1 else f"${float(x):,.2f}"


def _s(x: Any, limit: int = 80) -> str:
    return cell(str(x), limit=limit) if x is not None else "–"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _verdict(entry: dict[str, Any]) -> str:
    verdict = str(entry.get("verdict", ""))
    if verdict == "better":
        return "✅ better"
    if verdict == "worse":
        return "🔻 worse"
    return f"no detectable difference (MDE {_pts(entry.get('mde')).replace('+', '')})"


def diff_markdown(data: dict[str, Any], *, limit: int = COMMENT_LIMIT - RESERVED) -> str:
    """The diff as GitHub-flavoured Markdown, at most ``limit`` characters."""
    out = ["## evalreg: eval diff\n"]
    base, head = data.get("base") or {}, data.get("head") or {}
    out.append(
        f"Base: {_s(base.get('label'), 120)} → head: {_s(head.get('label'), 120)}. "
        "Differences are called better or worse only when significant (McNemar exact, "
        "Holm across slices); otherwise the minimum detectable effect (MDE) says how big a "
        "change these items could have shown.\n"
    )
    for warning in data.get("warnings") or []:
        out.append(f"> **⚠ Evidence changed:** {inline(str(warning), limit=300)}\n")
    out.append(_selections(data.get("selections") or []))
    compared = [c for c in data.get("cells") or [] if isinstance(c, dict)]
    out.append(_cells_table(compared))
    for entry in compared:
        if entry.get("status") == "compared":
            out.append(_cell_details(entry))
    return cut_to_fit("\n".join(out), limit, note="… cut to fit GitHub's comment limit")


def _selections(selections: list[Any]) -> str:
    out = ["### Decisions\n"]
    rows = []
    for s in selections:
        if not isinstance(s, dict):
            continue
        declared = s.get("declared") or [None, None]
        recommended = s.get("recommended") or [None, None]
        change = "changed" if declared[0] != declared[1] else "unchanged"
        rows.append(
            [
                _s(s.get("use_case")),
                f"{_s(declared[0])} → {_s(declared[1])} ({change})",
                f"{_s(recommended[0] or 'none')} → {_s(recommended[1] or 'none')}",
                "yes" if (s.get("waiver") or [False, False])[1] else "no",
                "⚠ changed" if s.get("policy_changed") else "unchanged",
            ]
        )
    out.append(_table(["use case", "declared", "policy recommends", "waiver", "criteria"], rows))
    gates = [(s, g) for s in selections if isinstance(s, dict) for g in s.get("gates") or []]
    if gates:
        out.append("Gates that changed state:\n")
        out.append(
            _table(
                ["use case", "candidate", "gate", "before", "after"],
                [
                    [
                        _s(s.get("use_case")),
                        _s(g.get("candidate")),
                        _s(g.get("gate"), 120),
                        _s(g.get("before")),
                        _s(g.get("after")),
                    ]
                    for s, g in gates
                ],
            )
        )
    return "\n".join(out)


def _cells_table(entries: list[dict[str, Any]]) -> str:
    rows = []
    for e in entries:
        overall = e.get("overall") or {}
        b, h = overall.get("base") or {}, overall.get("head") or {}
        all_slice = next((s for s in e.get("slices") or [] if s.get("slice") == "all"), None)
        verdict = _verdict(all_slice) if all_slice else "–"
        flips = e.get("flips") or {}
        rows.append(
            [
                _s(e.get("id")),
                _s(e.get("status")),
                f"{_num(b.get('pass_rate'))} → {_num(h.get('pass_rate'))}",
                verdict,
                f"{flips.get('regressions_total', 0)} / {flips.get('improvements_total', 0)}"
                if flips
                else "–",
                f"{_money(b.get('cost_per_item_usd'))} → {_money(h.get('cost_per_item_usd'))}",
                f"{_num(b.get('latency_p95_ms'), 0, 1, ' ms')} → "
                f"{_num(h.get('latency_p95_ms'), 0, 1, ' ms')}",
                ", ".join(_s(p) for p in e.get("fingerprint_changes") or []) or "–",
            ]
        )
    return "### Cells\n\n" + _table(
        [
            "cell",
            "status",
            "pass rate",
            "verdict (all items)",
            "regressions / improvements",
            "cost per request",
            "latency p95",
            "what changed",
        ],
        rows,
    )


def _flip_rows(flips: list[Any]) -> list[list[str]]:
    rows = []
    for f in flips:
        if not isinstance(f, dict):
            continue
        rows.append(
            [
                _s(f.get("item")),
                ", ".join(_s(t, 30) for t in (f.get("tags") or [])[:4]),
                f"{_s(f.get('base_level'))} → {_s(f.get('head_level'))}",
                ", ".join(_s(c, 40) for c in f.get("failed_criteria") or []) or "–",
                _s(f.get("input"), 120),
                _s(f.get("base_output"), 120),
                _s(f.get("head_output"), 120),
            ]
        )
    return rows


def _cell_details(e: dict[str, Any]) -> str:
    flips = e.get("flips") or {}
    summary = (
        f"{_s(e.get('id'))}: {int(flips.get('regressions_total', 0))} regressions, "
        f"{int(flips.get('improvements_total', 0))} improvements"
    )
    out = [f"<details><summary>{summary}</summary>\n"]
    rows = [
        [
            _s(s.get("slice")),
            str(int(s.get("n", 0))),
            f"{_pts(s.get('diff'))} ({_pts(s.get('lo'))} to {_pts(s.get('hi'))})",
            f"{int(s.get('only_base', 0))} / {int(s.get('only_head', 0))}",
            f"{float(s.get('p_adjusted', 1.0)):.3g}",
            _verdict(s),
        ]
        for s in e.get("slices") or []
        if isinstance(s, dict)
    ]
    out.append(
        _table(
            [
                "slice",
                "items",
                "head − base",
                "only base / only head passes",
                "p (Holm)",
                "verdict",
            ],
            rows,
        )
    )
    cf = e.get("counterfactual")
    if isinstance(cf, dict):
        out.append(
            "**The rubric changed.** Re-grading the base's stored responses under the new rubric "
            f"moves the pass rate by {_pts(cf.get('ruler'))} (the ruler); the rest, "
            f"{_pts(cf.get('model'))}, is the model's change.\n"
        )
    headers = ["item", "slices", "level", "failed criteria", "input", "base output", "head output"]
    for key, title in (("regressions", "Regressions"), ("improvements", "Improvements")):
        listed = flips.get(key) or []
        if listed:
            total = int(flips.get(f"{key}_total", len(listed)))
            more = f" (first {len(listed)} of {total})" if total > len(listed) else ""
            out.append(f"{title}{more}:\n")
            out.append(_table(headers, _flip_rows(listed)))
    changed = flips.get("changed_items") or {}
    if changed.get("count"):
        ids = ", ".join(_s(i) for i in changed.get("ids") or [])
        out.append(
            f"Changed items (content differs, so not counted as flips): "
            f"{int(changed['count'])}: {ids}\n"
        )
    for key, what in (("added_items", "added"), ("removed_items", "removed")):
        if flips.get(key):
            out.append(f"Items {what}: {int(flips[key])}.\n")
    out.append("</details>\n")
    return "\n".join(out)
