"""Render an ``evalreg diff`` (its document) as Markdown for a PR comment or a job summary.

The document may come from an artifact made by a pull request's own job: its types are
validated before it gets here (``compare.diff_document``), and every string in it is
still escaped and every number re-formatted here, as the values are the pull request's.
The result always fits GitHub's comment limit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

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
    wide_by_necessity,
)

if TYPE_CHECKING:
    from evalreg.compare.diff_document import (
        CellChange,
        CheckEntry,
        DiffDocument,
        DiffSide,
        Flip,
        Flips,
        RemoteConfig,
        RemoteObjects,
        SelectionChange,
        SliceRow,
    )

COMMENT_MARKER = "<!-- evalreg:diff -->"
"""What the sticky comment starts with: how ``evalreg comment`` finds it again."""
RESERVED = 200
"""Room left for the sticky marker and a cut note."""
MAX_FINDINGS = 20
"""Findings of a failed check listed in the comment; the rest are counted."""

_SHA = re.compile(r"[0-9a-f]{7,40}")


def _s(x: Any, limit: int = 80) -> str:
    return cell(str(x), limit=limit) if x is not None else "–"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _verdict(entry: SliceRow, esc: Callable[[Any], str] = _s) -> str:
    verdict = entry.verdict
    if verdict == "better":
        return "✅ better"
    if verdict == "worse":
        return "🔻 worse"
    if verdict == "untested":
        return "not tested (summaries only)"
    if verdict == TOO_SMALL_TO_TEST:
        return f"not tested (under {MIN_SLICE_ITEMS} items)"
    if entry.mde is None and entry.mde_note:
        return f"no detectable difference ({esc(entry.mde_note)})"
    return f"no detectable difference (MDE {points(entry.mde, signed=False)})"


def _moved(c: CellChange) -> bool:
    """Whether a cell's results moved while nothing they depend on did."""
    return bool(c.unexplained) or c.status == UNEXPLAINED


def _unexplained(cells: list[CellChange]) -> str:
    """The tampering notice: results that moved while nothing they depend on did."""
    moved = [c for c in cells if _moved(c)]
    if not moved:
        return ""
    names = ", ".join(_s(c.id) for c in moved[:10])
    more = f" and {len(moved) - 10} more" if len(moved) > 10 else ""
    return (
        f"> **🚨 Results changed without a cause:** {names}{more}. Their committed results "
        "differ from the base's while their fingerprint (eval set, task, rubric, pin, "
        "graders, code) is the same, so the same inputs would have to give other numbers: "
        "a hand-edited summary, or results that do not come from these inputs. Do not trust "
        "these numbers until `evalreg reproduce` confirms them.\n"
    )


def _all_items(slices: list[SliceRow] | None) -> SliceRow | None:
    """The row of slice ``all`` (every item), if there is one."""
    return next((s for s in slices or [] if s.slice == "all"), None)


def _ruled_verdict(e: CellChange, esc: Callable[[Any], str]) -> str:
    """The verdict of a cell whose rubric or graders changed: the ruler's and the model's
    shares apart, the model's tested on one ruler; or why they cannot be told apart."""
    cf = e.counterfactual
    if cf is None:
        return "⚠ not attributable: the rubric changed, the base cannot be re-graded here"
    model = _all_items(cf.model_slices)
    tested = f" ({_verdict(model, esc)})" if model else ""
    return f"ruler: {points(cf.ruler)}, model: {points(cf.model)}{tested}"


def cell_verdict(e: CellChange, reproduced: bool, esc: Callable[[Any], str] = _s) -> str:
    """A cell's verdict on all items, in words; ``esc`` shows a text from the data (as
    Markdown by default)."""
    if _moved(e):
        return "🚨 results changed without a cause"
    if e.status == "unchanged":
        # Identical is what reproduce proves; unreproduced, only the files are the same.
        return "identical results" if reproduced else "same committed results (unverified)"
    if e.ruler_changed is True and e.status == "compared":
        return _ruled_verdict(e, esc)
    all_slice = _all_items(e.slices)
    return _verdict(all_slice, esc) if all_slice else "–"


def comment_body(data: DiffDocument) -> str:
    """The exact body ``evalreg comment`` posts for ``data``: the Markdown with secrets
    redacted, behind the sticky marker, within GitHub's limit. ``comment --dry-run`` and
    ``diff --format comment`` print these bytes without a token or a network."""
    return fit_comment_body(redact(diff_markdown(data)), COMMENT_MARKER)


def diff_markdown(data: DiffDocument, *, limit: int = COMMENT_LIMIT - RESERVED) -> str:
    """The diff as GitHub-flavoured Markdown, at most ``limit`` characters."""
    out = ["## evalreg: eval diff\n"]
    if data.mode == "summaries":
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
    compared = data.cells
    reproduced = data.reproduction.status == "reproduced"
    out += _notices(data, compared, reproduced)
    out.append(f"{_header(data.base, data.head)} {how}")
    for warning in data.warnings:
        out.append(f"> **⚠ Evidence changed:** {inline(warning, limit=300)}\n")
    out.append(_unexplained(compared))
    out.append(_selections(data.selections))
    out.append(_cells_table(compared, reproduced))
    config = _config_changes(compared)
    if config:
        out.append(config)
    out.append(_coverage_table(compared))
    if not data.snippets:
        out.append(
            "Item text and model output are not shown: this registry keeps them out of "
            "comments (`privacy: {snippets: false}` in `registry/evalreg.yaml`).\n"
        )
    for entry in compared:
        if entry.status in ("compared", UNEXPLAINED):
            out.append(_cell_details(entry, data.snippets))
    return cut_to_fit("\n".join(out), limit, note="… cut to fit GitHub's comment limit")


def _commit(side: DiffSide) -> str:
    """One side of the header: short SHA and subject of the commit compared."""
    sha, subject = side.commit, side.subject
    text = f"`{sha[:12]}`" if sha is not None and _SHA.fullmatch(sha) else "–"
    if subject is not None and subject.strip():
        text += f" “{inline(subject, limit=100)}”"
    return text


def _header(base: DiffSide, head: DiffSide) -> str:
    where = f" (the merge-base with {_s(base.label, 60)})" if base.label else ""
    dirty = ""
    if head.uncommitted is True:
        dirty = " plus uncommitted changes in the working tree"
    return f"Compared: base {_commit(base)}{where} → head {_commit(head)}{dirty}."


def _changed_results(cells: list[CellChange]) -> bool:
    return any(c.status in ("compared", "new results", "added") for c in cells)


def _notices(data: DiffDocument, cells: list[CellChange], reproduced: bool) -> list[str]:
    """What must be read before any number: results not reproduced, a failed check, data
    missing from the remote, a changed remote, data this machine could not read."""
    out = []
    reason = data.reproduction.reason
    why = f" ({inline(reason, limit=200)})" if reason.strip() else ""
    remote = data.remote_objects
    missing = remote.missing if remote is not None else []
    if not reproduced:
        failed = data.reproduction.status == "failed"
        what = "could not be reproduced" if failed else "were not reproduced"
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
    if data.check is not None and not data.check.ok:
        out.append(_failed_check(data.check))
    if remote is not None and missing:
        out.append(_missing_objects(remote))
    if data.dvc_remote.changed:
        out.append(
            "> [!WARNING]\n> **The DVC remote configuration changed** (`.dvc/config`): "
            + _remote_change(data.dvc_remote.base, data.dvc_remote.head)
            + ". Data read from another remote is not the team's evidence.\n"
        )
    unreadable = data.data_unavailable or []
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


def _failed_check(check: CheckEntry) -> str:
    failing = [f for f in check.findings if f.severity != "warning"] or check.findings
    lines = [f"> [!CAUTION]\n> **`evalreg check` failed** (exit {count(check.exit_code)}):"]
    for f in failing[:MAX_FINDINGS]:
        where = _s(f.path, 120)
        if f.line > 0:
            where += f":{count(f.line)}"
        lines.append(f"> - {where}: {inline(f.message, limit=400)}")
    if len(failing) > MAX_FINDINGS:
        lines.append(f"> - … and {len(failing) - MAX_FINDINGS} more")
    return "\n".join(lines) + "\n"


def _missing_objects(remote: RemoteObjects) -> str:
    missing = remote.missing
    lines = [
        f"> [!CAUTION]\n> **{len(missing)} DVC object(s) this pull request's results use "
        f"are not on the team's remote** ({_s(remote.remote, 120)}): merged, main "
        "could not reproduce them. A maintainer must run `evalreg run` (and push) before "
        "merging."
    ]
    lines += [f"> - {_s(m.path, 120)} (md5 {_s(m.md5, 40)})" for m in missing[:MAX_FINDINGS]]
    if len(missing) > MAX_FINDINGS:
        lines.append(f"> - … and {len(missing) - MAX_FINDINGS} more")
    return "\n".join(lines) + "\n"


def _remote_change(base: RemoteConfig, head: RemoteConfig) -> str:
    parts = []
    if base.default != head.default:
        parts.append(f"default remote {_s(base.default or 'none')} → {_s(head.default or 'none')}")
    b, h = base.remotes, head.remotes
    for name in sorted(set(b) | set(h)):
        if b.get(name) != h.get(name):
            parts.append(
                f"remote {_s(name)}: {_s(b.get(name) or 'absent', 120)} → "
                f"{_s(h.get(name) or 'absent', 120)}"
            )
    if base.unreadable or head.unreadable:
        parts.append("the file cannot be read on one side")
    return "; ".join(parts) or "its contents differ"


def _selections(selections: list[SelectionChange]) -> str:
    out = ["### Decisions\n"]
    rows = []
    for s in selections:
        declared, recommended = s.declared, s.recommended
        change = "changed" if declared[0] != declared[1] else "unchanged"
        criteria = [
            what
            for what, changed in (("policy", s.policy_changed), ("rubric/graders", s.ruler_changed))
            if changed
        ]
        rows.append(
            [
                _s(s.use_case),
                f"{_s(declared[0])} → {_s(declared[1])} ({change})",
                f"{_s(recommended[0] or 'none')} → {_s(recommended[1] or 'none')}",
                "yes" if s.waiver[1] else "no",
                f"⚠ {' and '.join(criteria)} changed" if criteria else "unchanged",
            ]
        )
    out.append(_table(["use case", "declared", "policy recommends", "waiver", "criteria"], rows))
    for s in selections:
        waiver = s.waivers[1]
        if waiver is not None:
            out.append(
                f"Waiver for {_s(s.use_case)}: {_s(waiver.candidate)} "
                f"approved by {_s(waiver.approver)} on {_s(waiver.date)}: "
                f"{inline(waiver.reason, limit=300)}\n"
            )
    gates = [(s, g) for s in selections for g in s.gates]
    if gates:
        out.append("Gates that changed state:\n")
        out.append(
            _table(
                ["use case", "candidate", "gate", "before", "after"],
                [
                    [_s(s.use_case), _s(g.candidate), _s(g.gate, 120), _s(g.before), _s(g.after)]
                    for s, g in gates
                ],
            )
        )
    return "\n".join(out)


def _coverage_text(pair: tuple[int, int] | None) -> str:
    if pair is None:
        return "–"
    graded, applicable = (finite(v) for v in pair)
    if graded is None or applicable is None or not 0 <= graded <= applicable <= 1e15:
        return "–"
    return coverage_text(int(graded), int(applicable))


def _coverage_table(entries: list[CellChange]) -> str:
    """Human criteria's coverage (graded / applicable) per cell, base and head."""
    rows = []
    for e in entries:
        if e.coverage is None:
            continue
        base, head = e.coverage.base, e.coverage.head
        for criterion in sorted(set(base) | set(head)):
            rows.append(
                [
                    _s(e.id),
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


class _Unread:
    """A side's headline metrics where that side has none: each of them unknown."""

    pass_rate = cost_per_item_usd = latency_p95_ms = None


_UNREAD = _Unread()


def _cells_table(entries: list[CellChange], reproduced: bool) -> str:
    rows = []
    for e in entries:
        b, h = e.overall.base or _UNREAD, e.overall.head or _UNREAD
        flips = e.flips
        rows.append(
            [
                _s(e.id),
                _s(e.status),
                f"{percent(b.pass_rate)} → {percent(h.pass_rate)}",
                cell_verdict(e, reproduced),
                f"{count(flips.regressions_total)} / {count(flips.improvements_total)}"
                if flips is not None
                else "–",
                f"{usd(b.cost_per_item_usd)} → {usd(h.cost_per_item_usd)}",
                f"{milliseconds(b.latency_p95_ms)} → {milliseconds(h.latency_p95_ms)}",
                _what_changed(e),
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


def _what_changed(e: CellChange) -> str:
    """The fingerprint parts that changed, and the items a sequential run stopped at."""
    parts = [_s(p) for p in e.fingerprint_changes or []]
    if e.items_bought is not None:
        n = e.items_bought
        parts.append(f"items decided on: {n.base:,} → {n.head:,} of {n.of:,}")
    return ", ".join(parts) or "–"


def _config_changes(entries: list[CellChange]) -> str:
    """Each cell's pin and prompt settings that changed, as ``what: before → after``."""
    lines = []
    for e in entries:
        changes = e.config_changes or []
        if not changes:
            continue
        shown = "; ".join(
            f"{_s(c.what)}: {_setting(c.base)} → {_setting(c.head)}" for c in changes[:12]
        )
        more = f"; and {len(changes) - 12} more" if len(changes) > 12 else ""
        lines.append(f"- {_s(e.id)}: {shown}{more}")
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


def _flip_rows(flips: list[Flip]) -> list[list[str]]:
    return [
        [
            _s(f.item),
            ", ".join(_s(t, 30) for t in f.tags[:4]),
            f"{_s(f.base_level)} → {_s(f.head_level)}",
            ", ".join(_s(c, 40) for c in f.failed_criteria) or "–",
            _s(f.input, 120),
            _s(f.base_output, 120),
            _s(f.head_output, 120),
        ]
        for f in flips
    ]


def _slices_table(slices: list[SliceRow], *, tested: bool) -> str:
    """Per slice, head against base; ``tested=False`` (two rulers) shows no verdict."""
    rows = [
        [
            _s(s.slice),
            count(s.n),
            points_interval(s.diff, s.lo, s.hi) + wide_by_necessity(s.clusters or 0),
            f"{count(s.only_base)} / {count(s.only_head)}",
            p_value(s.p_adjusted),
            _verdict(s) if tested else "not the model's alone (rubric changed)",
        ]
        for s in slices
    ]
    headers = [
        "slice",
        "items",
        "head − base",
        "only base / only head passes",
        "p (Holm for slices)",
    ]
    return _table([*headers, "verdict"], rows)


def _cell_details(e: CellChange, snippets: bool = True) -> str:
    flips = e.flips
    # Raw HTML: Markdown's backslash escapes would show, so HTML's character references.
    name = html_inline(e.id, limit=80)
    summary = (
        f"{name}: {count(flips.regressions_total)} regressions, "
        f"{count(flips.improvements_total)} improvements"
        if flips is not None
        else f"{name}: pass rate per slice"
    )
    out = [f"<details><summary>{summary}</summary>\n"]
    ruled = e.ruler_changed is True
    cf = e.counterfactual
    out.append(_slices_table(e.slices or [], tested=not ruled))
    if cf is not None:
        out.append(
            "**The rubric or graders changed.** Re-grading the base's stored responses under "
            f"the new ones moves the pass rate by {points(cf.ruler)} (the ruler); the "
            f"rest, {points(cf.model)}, is the model's change, tested against that "
            "re-grade (the same items under one ruler):\n"
        )
        out.append(_slices_table(cf.model_slices, tested=True))
    elif ruled:
        out.append(
            "**The rubric or graders changed**, and the base's responses cannot be re-graded "
            "here: how much of this change is the ruler and how much the model is not "
            "attributable.\n"
        )
    if flips is not None:
        out += _flip_lists(flips, snippets)
    out.append("</details>\n")
    return "\n".join(out)


def _flip_lists(flips: Flips, snippets: bool) -> list[str]:
    """The regressions and improvements listed, the changed, added and removed items counted."""
    out = []
    headers = ["item", "slices", "level", "failed criteria", "input", "base output", "head output"]
    width = len(headers) if snippets else 4
    for listed, total, title in (
        (flips.regressions, flips.regressions_total, "Regressions"),
        (flips.improvements, flips.improvements_total, "Improvements"),
    ):
        if listed:
            more = f" (first {len(listed)} of {count(total)})" if total > len(listed) else ""
            out.append(f"{title}{more}:\n")
            out.append(_table(headers[:width], [r[:width] for r in _flip_rows(listed)]))
    changed = flips.changed_items
    if changed.count:
        ids = ", ".join(_s(i) for i in changed.ids)
        out.append(
            f"Changed items (content differs, so not counted as flips): "
            f"{count(changed.count)}: {ids}\n"
        )
    for n, what in ((flips.added_items, "added"), (flips.removed_items, "removed")):
        if n:
            out.append(f"Items {what}: {count(n)}.\n")
    return out
