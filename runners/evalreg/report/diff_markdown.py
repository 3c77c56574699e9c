"""Render an ``evalreg diff`` (its JSON data) as Markdown for a PR comment or a job summary.

Everything in the data is treated as untrusted — it may come from an artifact made by a
pull request's own job — so every string is escaped and every number re-formatted here.
The result always fits GitHub's comment limit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from evalreg.compare.statuses import UNEXPLAINED
from evalreg.families import MIN_SLICE_ITEMS, TOO_SMALL_TO_TEST, family_sentence
from evalreg.gitops.github import fit_comment_body
from evalreg.redaction import redact
from evalreg.text.escape import COMMENT_LIMIT, cell, cut_to_fit, html_inline, inline
from evalreg.text.numbers import (
    count,
    coverage_text,
    finite,
    milliseconds,
    p_value,
    percent,
    points,
    points_interval,
    usd,
)

COMMENT_MARKER = "<!-- evalreg:diff -->"
"""What the sticky comment starts with: how ``evalreg comment`` finds it again."""
RESERVED = 200
"""Room left for the sticky marker and a cut note."""
MAX_FINDINGS = 20
"""Findings of a failed check listed in the comment; the rest are counted."""

_SHA = re.compile(r"[0-9a-f]{7,40}")


def _dict(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def _list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


def _pair(x: Any) -> list[Any]:
    """A [before, after] pair, or two unknowns."""
    return x if isinstance(x, list) and len(x) == 2 else [None, None]


def _s(x: Any, limit: int = 80) -> str:
    return cell(str(x), limit=limit) if x is not None else "–"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _verdict(entry: dict[str, Any], esc: Callable[[Any], str] = _s) -> str:
    verdict = str(entry.get("verdict", ""))
    if verdict == "better":
        return "✅ better"
    if verdict == "worse":
        return "🔻 worse"
    if verdict == "untested":
        return "not tested (summaries only)"
    if verdict == TOO_SMALL_TO_TEST:
        return f"not tested (under {MIN_SLICE_ITEMS} items)"
    if entry.get("mde") is None and entry.get("mde_note"):
        return f"no detectable difference ({esc(entry.get('mde_note'))})"
    return f"no detectable difference (MDE {points(entry.get('mde'), signed=False)})"


def _unexplained(cells: list[Any]) -> str:
    """The tampering notice: results that moved while nothing they depend on did."""
    moved = [
        c
        for c in cells
        if isinstance(c, dict) and (c.get("unexplained") or c.get("status") == UNEXPLAINED)
    ]
    if not moved:
        return ""
    names = ", ".join(_s(c.get("id")) for c in moved[:10])
    more = f" and {len(moved) - 10} more" if len(moved) > 10 else ""
    return (
        f"> **🚨 Results changed without a cause:** {names}{more}. Their committed results "
        "differ from the base's while their fingerprint (eval set, task, rubric, pin, "
        "graders, code) is the same, so the same inputs would have to give other numbers: "
        "a hand-edited summary, or results that do not come from these inputs. Do not trust "
        "these numbers until `evalreg reproduce` confirms them.\n"
    )


def _ruled_verdict(e: dict[str, Any], esc: Callable[[Any], str]) -> str:
    """The verdict of a cell whose rubric or graders changed: the ruler's and the model's
    shares apart, the model's tested on one ruler; or why they cannot be told apart."""
    cf = e.get("counterfactual")
    if not isinstance(cf, dict):
        return "⚠ not attributable: the rubric changed, the base cannot be re-graded here"
    model = next(
        (
            s
            for s in _list(cf.get("model_slices"))
            if isinstance(s, dict) and s.get("slice") == "all"
        ),
        None,
    )
    tested = f" ({_verdict(model, esc)})" if model else ""
    return f"ruler: {points(cf.get('ruler'))}, model: {points(cf.get('model'))}{tested}"


def cell_verdict(e: dict[str, Any], reproduced: bool, esc: Callable[[Any], str] = _s) -> str:
    """A cell's verdict on all items, in words; ``esc`` shows a text from the data (as
    Markdown by default)."""
    if e.get("unexplained") or e.get("status") == UNEXPLAINED:
        return "🚨 results changed without a cause"
    if e.get("status") == "unchanged":
        # Identical is what reproduce proves; unreproduced, only the files are the same.
        return "identical results" if reproduced else "same committed results (unverified)"
    if e.get("ruler_changed") is True and e.get("status") == "compared":
        return _ruled_verdict(e, esc)
    all_slice = next(
        (s for s in _list(e.get("slices")) if isinstance(s, dict) and s.get("slice") == "all"),
        None,
    )
    return _verdict(all_slice, esc) if all_slice else "–"


def comment_body(data: dict[str, Any]) -> str:
    """The exact body ``evalreg comment`` posts for ``data``: the Markdown with secrets
    redacted, behind the sticky marker, within GitHub's limit. ``comment --dry-run`` and
    ``diff --format comment`` print these bytes without a token or a network."""
    return fit_comment_body(redact(diff_markdown(data)), COMMENT_MARKER)


def diff_markdown(data: dict[str, Any], *, limit: int = COMMENT_LIMIT - RESERVED) -> str:
    """The diff as GitHub-flavoured Markdown, at most ``limit`` characters."""
    out = ["## evalreg: eval diff\n"]
    base, head = _dict(data.get("base")), _dict(data.get("head"))
    if data.get("mode") == "summaries":
        how = (
            "Compared from the committed summaries only: each slice's pass rate before and "
            "after, with a 95 % interval for the difference of two independent rates "
            "(Newcombe). Without the per-item data no difference is tested and no item is "
            "listed.\n"
        )
    else:
        how = (
            "Differences are called better or worse only when their paired interval, at the "
            "level its test used, excludes 0; otherwise the minimum detectable effect (MDE) "
            "says how big a change that test could have shown. " + family_sentence() + "\n"
        )
    compared = [c for c in _list(data.get("cells")) if isinstance(c, dict)]
    reproduced = _dict(data.get("reproduction")).get("status") == "reproduced"
    out += _notices(data, compared, reproduced)
    out.append(f"{_header(base, head)} {how}")
    for warning in _list(data.get("warnings")):
        out.append(f"> **⚠ Evidence changed:** {inline(str(warning), limit=300)}\n")
    out.append(_unexplained(_list(data.get("cells"))))
    out.append(_selections(_list(data.get("selections"))))
    out.append(_cells_table(compared, reproduced))
    config = _config_changes(compared)
    if config:
        out.append(config)
    out.append(_coverage_table(compared))
    snippets = data.get("snippets") is not False
    if not snippets:
        out.append(
            "Item text and model output are not shown: this registry keeps them out of "
            "comments (`privacy: {snippets: false}` in `registry/evalreg.yaml`).\n"
        )
    for entry in compared:
        if entry.get("status") in ("compared", UNEXPLAINED):
            out.append(_cell_details(entry, snippets))
    return cut_to_fit("\n".join(out), limit, note="… cut to fit GitHub's comment limit")


def _commit(side: dict[str, Any]) -> str:
    """One side of the header: short SHA and subject of the commit compared."""
    sha = side.get("commit")
    subject = side.get("subject")
    text = f"`{sha[:12]}`" if isinstance(sha, str) and _SHA.fullmatch(sha) else "–"
    if isinstance(subject, str) and subject.strip():
        text += f" “{inline(subject, limit=100)}”"
    return text


def _header(base: dict[str, Any], head: dict[str, Any]) -> str:
    where = f" (the merge-base with {_s(base.get('label'), 60)})" if base.get("label") else ""
    dirty = ""
    if head.get("uncommitted") is True:
        dirty = " plus uncommitted changes in the working tree"
    return f"Compared: base {_commit(base)}{where} → head {_commit(head)}{dirty}."


def _changed_results(cells: list[dict[str, Any]]) -> bool:
    return any(c.get("status") in ("compared", "new results", "added") for c in cells)


def _notices(data: dict[str, Any], cells: list[dict[str, Any]], reproduced: bool) -> list[str]:
    """What must be read before any number: results not reproduced, a failed check, data
    missing from the remote, a changed remote, data this machine could not read."""
    out = []
    repro = _dict(data.get("reproduction"))
    status = repro.get("status")
    reason = repro.get("reason")
    why = f" ({inline(reason, limit=200)})" if isinstance(reason, str) and reason.strip() else ""
    remote = _dict(data.get("remote_objects"))
    missing = [m for m in _list(remote.get("missing")) if isinstance(m, dict)]
    if not reproduced:
        what = "could not be reproduced" if status == "failed" else "were not reproduced"
        text = (
            f"> [!CAUTION]\n> **Not reproduced: these numbers are the pull request's own "
            f"claims.** Its committed results {what} here{why}; nothing below was recomputed "
            "from the stored responses."
        )
        if _changed_results(cells) and not missing:
            text += (
                " Whether their data is on the team's DVC remote is not known: a maintainer "
                "must run `evalreg run` (and push) before merging."
            )
        out.append(text + "\n")
    check = data.get("check")
    if isinstance(check, dict) and check.get("ok") is not True:
        findings = [f for f in _list(check.get("findings")) if isinstance(f, dict)]
        failing = [f for f in findings if f.get("severity") != "warning"] or findings
        lines = [
            f"> [!CAUTION]\n> **`evalreg check` failed** (exit {count(check.get('exit_code'))}):"
        ]
        for f in failing[:MAX_FINDINGS]:
            where = _s(f.get("path"), 120)
            if isinstance(f.get("line"), int) and f["line"] > 0:
                where += f":{count(f['line'])}"
            lines.append(f"> - {where}: {inline(str(f.get('message', '')), limit=400)}")
        if len(failing) > MAX_FINDINGS:
            lines.append(f"> - … and {len(failing) - MAX_FINDINGS} more")
        out.append("\n".join(lines) + "\n")
    if missing:
        lines = [
            f"> [!CAUTION]\n> **{len(missing)} DVC object(s) this pull request's results use "
            f"are not on the team's remote** ({_s(remote.get('remote'), 120)}): merged, main "
            "could not reproduce them. A maintainer must run `evalreg run` (and push) before "
            "merging."
        ]
        lines += [
            f"> - {_s(m.get('path'), 120)} (md5 {_s(m.get('md5'), 40)})"
            for m in missing[:MAX_FINDINGS]
        ]
        if len(missing) > MAX_FINDINGS:
            lines.append(f"> - … and {len(missing) - MAX_FINDINGS} more")
        out.append("\n".join(lines) + "\n")
    dvc_remote = _dict(data.get("dvc_remote"))
    if dvc_remote.get("changed") is True:
        out.append(
            "> [!WARNING]\n> **The DVC remote configuration changed** (`.dvc/config`): "
            + _remote_change(_dict(dvc_remote.get("base")), _dict(dvc_remote.get("head")))
            + ". Data read from another remote is not the team's evidence.\n"
        )
    unreadable = [str(p) for p in _list(data.get("data_unavailable"))]
    if unreadable:
        shown = ", ".join(_s(p, 100) for p in unreadable[:3])
        more = f" and {len(unreadable) - 3} more" if len(unreadable) > 3 else ""
        out.append(
            f"> **ℹ Data not readable here:** {shown}{more} (not on this machine, and the DVC "
            "remote could not be read). This is not a change of the evidence: slices are "
            "compared as unpaired per-sample pass rates from the committed summaries, with no "
            "paired test and no flipped items. Run `evalreg diff` where the DVC remote is "
            "readable for the full comparison.\n"
        )
    return out


def _remote_change(base: dict[str, Any], head: dict[str, Any]) -> str:
    parts = []
    if base.get("default") != head.get("default"):
        parts.append(
            f"default remote {_s(base.get('default') or 'none')} → "
            f"{_s(head.get('default') or 'none')}"
        )
    b, h = _dict(base.get("remotes")), _dict(head.get("remotes"))
    for name in sorted(set(b) | set(h), key=str):
        if b.get(name) != h.get(name):
            parts.append(
                f"remote {_s(name)}: {_s(b.get(name) or 'absent', 120)} → "
                f"{_s(h.get(name) or 'absent', 120)}"
            )
    if base.get("unreadable") or head.get("unreadable"):
        parts.append("the file cannot be read on one side")
    return "; ".join(parts) or "its contents differ"


def _selections(selections: list[Any]) -> str:
    out = ["### Decisions\n"]
    rows = []
    for s in selections:
        if not isinstance(s, dict):
            continue
        declared = _pair(s.get("declared"))
        recommended = _pair(s.get("recommended"))
        change = "changed" if declared[0] != declared[1] else "unchanged"
        criteria = [
            what
            for what, changed in (
                ("policy", s.get("policy_changed")),
                ("rubric/graders", s.get("ruler_changed")),
            )
            if changed is True
        ]
        rows.append(
            [
                _s(s.get("use_case")),
                f"{_s(declared[0])} → {_s(declared[1])} ({change})",
                f"{_s(recommended[0] or 'none')} → {_s(recommended[1] or 'none')}",
                "yes" if _pair(s.get("waiver"))[1] is True else "no",
                f"⚠ {' and '.join(criteria)} changed" if criteria else "unchanged",
            ]
        )
    out.append(_table(["use case", "declared", "policy recommends", "waiver", "criteria"], rows))
    for s in selections:
        waiver = _dict(_pair(_dict(s).get("waivers"))[1])
        if waiver:
            out.append(
                f"Waiver for {_s(_dict(s).get('use_case'))}: {_s(waiver.get('candidate'))} "
                f"approved by {_s(waiver.get('approver'))} on {_s(waiver.get('date'))}: "
                f"{inline(str(waiver.get('reason', '')), limit=300)}\n"
            )
    gates = [
        (s, g)
        for s in selections
        if isinstance(s, dict)
        for g in _list(s.get("gates"))
        if isinstance(g, dict)
    ]
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


def _coverage_text(x: Any) -> str:
    pair = _pair(x)
    graded, applicable = (finite(v) for v in pair)
    if graded is None or applicable is None or not 0 <= graded <= applicable <= 1e15:
        return "–"
    return coverage_text(int(graded), int(applicable))


def _coverage_table(entries: list[dict[str, Any]]) -> str:
    """Human criteria's coverage (graded / applicable) per cell, base and head."""
    rows = []
    for e in entries:
        coverage = _dict(e.get("coverage"))
        base, head = _dict(coverage.get("base")), _dict(coverage.get("head"))
        for criterion in sorted(set(base) | set(head)):
            rows.append(
                [
                    _s(e.get("id")),
                    _s(criterion),
                    f"{_coverage_text(base.get(criterion))} → "
                    f"{_coverage_text(head.get(criterion))}",
                ]
            )
    if not rows:
        return ""
    return "### Human grades\n\nCoverage: graded / applicable responses.\n\n" + _table(
        ["cell", "criterion", "coverage"], rows
    )


def _cells_table(entries: list[dict[str, Any]], reproduced: bool) -> str:
    rows = []
    for e in entries:
        overall = _dict(e.get("overall"))
        b, h = _dict(overall.get("base")), _dict(overall.get("head"))
        verdict = cell_verdict(e, reproduced)
        flips = _dict(e.get("flips"))
        rows.append(
            [
                _s(e.get("id")),
                _s(e.get("status")),
                f"{percent(b.get('pass_rate'))} → {percent(h.get('pass_rate'))}",
                verdict,
                f"{count(flips.get('regressions_total', 0))} / "
                f"{count(flips.get('improvements_total', 0))}"
                if flips
                else "–",
                f"{usd(b.get('cost_per_item_usd'))} → {usd(h.get('cost_per_item_usd'))}",
                f"{milliseconds(b.get('latency_p95_ms'))} → "
                f"{milliseconds(h.get('latency_p95_ms'))}",
                ", ".join(_s(p) for p in _list(e.get("fingerprint_changes"))) or "–",
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


def _config_changes(entries: list[dict[str, Any]]) -> str:
    """Each cell's pin and prompt settings that changed, as ``what: before → after``."""
    lines = []
    for e in entries:
        changes = [c for c in _list(e.get("config_changes")) if isinstance(c, dict)]
        if not changes:
            continue
        shown = "; ".join(
            f"{_s(c.get('what'))}: {_setting(c.get('base'))} → {_setting(c.get('head'))}"
            for c in changes[:12]
        )
        more = f"; and {len(changes) - 12} more" if len(changes) > 12 else ""
        lines.append(f"- {_s(e.get('id'))}: {shown}{more}")
    if not lines:
        return ""
    return "### What changed in the configuration\n\n" + "\n".join(lines) + "\n"


def _setting(value: Any) -> str:
    """A setting's value on one line: absent, a number, or quoted text (cut)."""
    if value is None:
        return "(none)"
    if isinstance(value, str):
        return "“" + inline(value, limit=60) + "”"
    return inline(json.dumps(value, sort_keys=True), limit=60)


def _flip_rows(flips: list[Any]) -> list[list[str]]:
    rows = []
    for f in flips:
        if not isinstance(f, dict):
            continue
        rows.append(
            [
                _s(f.get("item")),
                ", ".join(_s(t, 30) for t in _list(f.get("tags"))[:4]),
                f"{_s(f.get('base_level'))} → {_s(f.get('head_level'))}",
                ", ".join(_s(c, 40) for c in _list(f.get("failed_criteria"))) or "–",
                _s(f.get("input"), 120),
                _s(f.get("base_output"), 120),
                _s(f.get("head_output"), 120),
            ]
        )
    return rows


def _slices_table(slices: list[Any], *, tested: bool) -> str:
    """Per slice, head against base; ``tested=False`` (two rulers) shows no verdict."""
    rows = [
        [
            _s(s.get("slice")),
            count(s.get("n")),
            points_interval(s.get("diff"), s.get("lo"), s.get("hi")),
            f"{count(s.get('only_base'))} / {count(s.get('only_head'))}",
            p_value(s.get("p_adjusted")),
            _verdict(s) if tested else "not the model's alone (rubric changed)",
        ]
        for s in slices
        if isinstance(s, dict)
    ]
    headers = [
        "slice",
        "items",
        "head − base",
        "only base / only head passes",
        "p (Holm for slices)",
    ]
    return _table([*headers, "verdict"], rows)


def _cell_details(e: dict[str, Any], snippets: bool = True) -> str:
    flips = _dict(e.get("flips"))
    # Raw HTML: Markdown's backslash escapes would show, so HTML's character references.
    name = html_inline(str(e.get("id")), limit=80) if e.get("id") is not None else "–"
    summary = (
        f"{name}: {count(flips.get('regressions_total', 0))} regressions, "
        f"{count(flips.get('improvements_total', 0))} improvements"
        if flips
        else f"{name}: pass rate per slice"
    )
    out = [f"<details><summary>{summary}</summary>\n"]
    ruled = e.get("ruler_changed") is True
    cf = e.get("counterfactual")
    out.append(_slices_table(_list(e.get("slices")), tested=not ruled))
    if isinstance(cf, dict):
        out.append(
            "**The rubric or graders changed.** Re-grading the base's stored responses under "
            f"the new ones moves the pass rate by {points(cf.get('ruler'))} (the ruler); the "
            f"rest, {points(cf.get('model'))}, is the model's change, tested against that "
            "re-grade (the same items under one ruler):\n"
        )
        out.append(_slices_table(_list(cf.get("model_slices")), tested=True))
    elif ruled:
        out.append(
            "**The rubric or graders changed**, and the base's responses cannot be re-graded "
            "here: how much of this change is the ruler and how much the model is not "
            "attributable.\n"
        )
    headers = ["item", "slices", "level", "failed criteria", "input", "base output", "head output"]
    width = len(headers) if snippets else 4
    for key, title in (("regressions", "Regressions"), ("improvements", "Improvements")):
        listed = _list(flips.get(key))
        if listed:
            total = flips.get(f"{key}_total", len(listed))
            more = (
                f" (first {len(listed)} of {count(total)})"
                if isinstance(total, int) and total > len(listed)
                else ""
            )
            out.append(f"{title}{more}:\n")
            out.append(_table(headers[:width], [r[:width] for r in _flip_rows(listed)]))
    changed = _dict(flips.get("changed_items"))
    if changed.get("count"):
        ids = ", ".join(_s(i) for i in _list(changed.get("ids")))
        out.append(
            f"Changed items (content differs, so not counted as flips): "
            f"{count(changed['count'])}: {ids}\n"
        )
    for key, what in (("added_items", "added"), ("removed_items", "removed")):
        if flips.get(key):
            out.append(f"Items {what}: {count(flips[key])}.\n")
    out.append("</details>\n")
    return "\n".join(out)
