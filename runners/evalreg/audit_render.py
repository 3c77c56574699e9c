"""The audit record as GitHub-flavoured Markdown and as an offline static HTML page."""

from __future__ import annotations

import html
from pathlib import Path

from markdown_it import MarkdownIt

from evalreg.audit import (
    AuditRecord,
    Change,
    CommitInfo,
    Person,
    PullRequestReviews,
    ReproduceVerdict,
    SelectionAudit,
)
from evalreg.redaction import redact
from evalreg.report.escape import cell

MAX_CELL_CHARS = 600

_FLAG_LABELS = {
    "criteria_after_evidence": "criteria changed after the evidence",
    "selected_without_evidence": "a declaration without results",
    "unreadable": "unreadable file",
}
_STATE_LABELS = {
    "APPROVED": "approved",
    "CHANGES_REQUESTED": "changes requested",
    "COMMENTED": "commented",
    "DISMISSED": "dismissed",
}
_SUMMARY_HEADER = (
    "use case",
    "selection",
    "declared",
    "declared since",
    "by",
    "PR",
    "approvals",
    "first results",
    "flags",
)
_CHANGE_HEADER = ("date (UTC)", "commit", "PR", "author", "selection", "change", "from", "to")
_CHANGE_LABELS = {
    "selected": "declared candidate",
    "policy": "policy",
    "candidates": "candidates",
    "waivers": "waivers",
    "task": "task",
    "removed": "file removed",
}

_CSS = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1f2328;
  max-width: 72rem; margin: 2rem auto; padding: 0 1rem; }
h1, h2 { border-bottom: 1px solid #d1d9e0; padding-bottom: .3rem; }
table { border-collapse: collapse; margin: 1rem 0; display: block; overflow-x: auto; }
th, td { border: 1px solid #d1d9e0; padding: .3rem .6rem; vertical-align: top; }
th { background: #f6f8fa; text-align: left; }
tr:nth-child(2n) td { background: #fbfcfd; }
code { font: 13px ui-monospace, SFMono-Regular, Menlo, monospace; background: #eff1f3;
  padding: .1rem .3rem; border-radius: 4px; }
"""


def audit_markdown(record: AuditRecord) -> str:
    """The record as Markdown: summary per use case, flags, changes, approvals, reproduction."""
    approvals = None
    if record.approvals is not None:
        approvals = {p.number: p for p in record.approvals}
    lines = [
        f"# Audit record for `{record.rev[:12]}`",
        "",
        f"Revision `{record.rev}`, committed {record.commit.committed_at} by "
        f"{_cell(record.commit.author.name)}. First-parent history: {record.history} "
        f"commit{'s' if record.history != 1 else ''} since the root commit "
        f"`{record.root.sha[:12]}` ({record.root.committed_at}). Dates are UTC; events are "
        "ordered by their place on the first-parent line, not by author dates.",
        "",
        "## Use cases",
        "",
    ]
    if record.selections:
        lines += _table(_SUMMARY_HEADER, [_summary_row(s, approvals) for s in record.selections])
    else:
        lines.append("No selection files at this revision.")
    lines += ["", "## Flags", ""]
    flags = [(s.id, f) for s in record.selections for f in s.flags]
    lines += [f"- **{_cell(sid)}** — {_cell(flag.message)}" for sid, flag in flags] or [
        "None: every policy predates its evidence and every declared candidate had results."
    ]
    lines += ["", "## Changes", ""]
    lines += _changes(record.selections)
    if record.approvals is not None:
        lines += ["", "## Approvals", ""]
        lines += _approvals(record.approvals)
    lines += ["", "## Reproduction", ""]
    lines += _reproduction(record.rev, record.reproduction)
    return "\n".join(lines) + "\n"


def write_html(record: AuditRecord, directory: Path) -> list[Path]:
    """Write ``index.html``: the Markdown rendered for offline reading, no scripts, no fetches."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    # Images would fetch from the network; the page must render with nothing but itself.
    md.disable("image")
    body = md.render(audit_markdown(record))
    title = html.escape(f"Audit record for {record.rev[:12]}")
    page = (
        "<!doctype html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{title}</title>\n<style>{_CSS}</style>\n</head>\n"
        f"<body>\n<main>\n{body}</main>\n</body>\n</html>\n"
    )
    directory.mkdir(parents=True, exist_ok=True)
    index = directory / "index.html"
    index.write_text(redact(page), encoding="utf-8", newline="\n")
    return [index]


def _summary_row(
    selection: SelectionAudit, approvals: dict[int, PullRequestReviews] | None
) -> list[str]:
    last = selection.last_selected_change
    pr = last.commit.pr if last else None
    approval = _standing(approvals[pr]) if approvals is not None and pr else "—"
    labels = sorted({_FLAG_LABELS[f.kind] for f in selection.flags})
    return [
        _cell(selection.use_case or "(unreadable)"),
        _cell(selection.id),
        _cell(selection.declared or "(unreadable)"),
        _commit_ref(last.commit) if last else "—",
        _by(last) if last else "—",
        f"#{pr}" if pr else "—",
        approval,
        _commit_ref(selection.evidence) if selection.evidence else "none",
        ", ".join(labels) or "none",
    ]


def _changes(selections: tuple[SelectionAudit, ...]) -> list[str]:
    changes = sorted(
        ((s.id, c) for s in selections for c in s.changes),
        key=lambda pair: (pair[1].commit.position, pair[0]),
    )
    if not changes:
        return ["No changes."]
    rows = [
        [
            change.commit.committed_at,
            f"`{change.commit.sha[:12]}`",
            f"#{change.commit.pr}" if change.commit.pr else "—",
            _by(change, email=True),
            _cell(sid),
            _CHANGE_LABELS[change.kind],
            _cell(change.before) if change.before is not None else "—",
            _cell(change.after) if change.after is not None else "—",
            _cell(change.commit.subject),
        ]
        for sid, change in changes
    ]
    return _table((*_CHANGE_HEADER, "subject"), rows)


def _approvals(approvals: tuple[PullRequestReviews, ...]) -> list[str]:
    if not approvals:
        return ["No change came through a pull request."]
    rows = []
    for pull in approvals:
        if pull.error is not None:
            rows.append([f"#{pull.number}", "—", f"unavailable: {_cell(pull.error)}", "—", "—"])
        elif not pull.reviews:
            rows.append([f"#{pull.number}", "—", "no reviews", "—", "—"])
        for review in pull.reviews:
            rows.append(
                [
                    f"#{pull.number}",
                    _cell(review.reviewer),
                    _STATE_LABELS.get(review.state, _cell(review.state)),
                    review.submitted_at,
                    f"`{review.commit[:12]}`" if review.commit else "—",
                ]
            )
    return _table(("PR", "reviewer", "state", "submitted (UTC)", "on commit"), rows)


def _reproduction(rev: str, verdict: ReproduceVerdict | None) -> list[str]:
    command = f"`evalreg reproduce {rev}`"
    if verdict is None:
        return [f"Not verified in this record: run {command}."]
    if verdict.status == "error":
        return [f"Could not reproduce ({command}): {_cell(verdict.error or '')}"]
    if verdict.status == "nothing":
        return [
            f"Nothing to reproduce: no cell has a recorded result at this revision ({command})."
        ]
    lines = []
    others = [v for v in verdict.recorded_versions if v != verdict.running_version]
    if others:
        lines += [
            f"Recorded with evalreg {_cell(', '.join(verdict.recorded_versions))}; reproduced "
            f"with {_cell(verdict.running_version)}: grader code is part of the evidence, so "
            f"reproduce with evalreg {_cell(others[0])} to compare like with like.",
            "",
        ]
    total = len(verdict.cells)
    if verdict.status == "identical":
        lines.append(
            f"Identical: all {total} recorded cell{'s' if total != 1 else ''} reproduce "
            f"offline ({command}, evalreg {_cell(verdict.running_version)})."
        )
        return lines
    differing = [c for c in verdict.cells if not c.identical]
    lines += [
        f"Different: {len(differing)} of {total} recorded cells do not reproduce ({command} "
        "lists every difference).",
        "",
    ]
    return lines + _table(
        ("cell", "differences"), [[_cell(c.cell), str(c.differences)] for c in differing]
    )


def _commit_ref(commit: CommitInfo) -> str:
    return f"{commit.committed_at} in `{commit.sha[:12]}`"


def _by(change: Change, *, email: bool = False) -> str:
    who = _person(change.commit.author, email)
    if change.merged_authors:
        authors = ", ".join(_person(p, email) for p in change.merged_authors)
        return f"{authors} (merged by {who})"
    return who


def _person(person: Person, email: bool) -> str:
    return _cell(f"{person.name} <{person.email}>" if email else person.name)


def _standing(pull: PullRequestReviews) -> str:
    if pull.error is not None:
        return "unavailable"
    standing = pull.standing
    if not standing:
        return "no reviews"
    return ", ".join(f"{_cell(who)} ({_STATE_LABELS.get(s, _cell(s))})" for who, s in standing)


def _table(header: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def _cell(text: str) -> str:
    """``text`` from a commit, a YAML file or GitHub, safe inside a Markdown table cell."""
    return cell(text, limit=MAX_CELL_CHARS)
