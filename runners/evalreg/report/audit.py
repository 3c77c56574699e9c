"""The audit record as GitHub-flavoured Markdown and as an offline static HTML page."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from markdown_it import MarkdownIt

from evalreg.audit.commits import CommitInfo, Person
from evalreg.audit.rebuys import Rebuy
from evalreg.audit.record import (
    AuditRecord,
    Change,
    FileChange,
    PullRequestReviews,
    ReproduceVerdict,
    SelectionAudit,
    WaiverCheck,
)
from evalreg.audit.remotes import RemoteChange
from evalreg.compare.remote import DefaultRemote
from evalreg.redaction import redact
from evalreg.report.governance import chart, headline
from evalreg.selection.evidence import SelectionEvidence
from evalreg.store.rebought_log import REBOUGHT_LOG
from evalreg.text.escape import cell
from evalreg.text.numbers import plural

MAX_CELL_CHARS = 600

_FLAG_LABELS = {
    "criteria_after_evidence": "criteria changed after the evidence",
    "declared_after_evidence": "selection declared after its evidence",
    "selected_without_evidence": "a declaration without results",
    "unreadable": "unreadable file",
    "waiver_unapproved": "waiver approval not verified",
    "evidence_rebought": "evidence bought again",
}
_WAIVER_LABELS = {
    "approved": "approved on the final head",
    "no_pull_request": "no pull request",
    "unavailable": "reviews unavailable",
    "no_reviewer": "no such reviewer",
    "not_approved": "not approved",
    "changes_requested": "changes requested",
    "earlier_commit": "approved an earlier commit",
    "pr_author": "approver is the author",
}
_FILE_LABELS = {"rubric": "rubric", "task": "task", "pin": "pin", "evalset": "eval set"}
_REBUY_HEADER = (
    "date (UTC)",
    "commit",
    "PR",
    "bought again by",
    "cells",
    "lost objects",
    "lost objects brought in by",
)
_REMOTE_HEADER = ("date (UTC)", "commit", "PR", "changed by", "from", "to", "subject")
_FILE_HEADER = ("date (UTC)", "commit", "PR", "author", "file", "use cases", "change", "subject")
_NOT_CHECKED = (
    "Approvals not checked: no GitHub token was given, so no review was read and no "
    "waiver's approver was matched with an approving review on its pull request's final "
    "head commit. Set GITHUB_TOKEN (and GITHUB_REPOSITORY, or pass --repository) to check "
    "them."
)
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
figure.chart { margin: 1rem 0; overflow-x: auto; }
figure.chart svg { max-width: 100%; height: auto; }
code { font: 13px ui-monospace, SFMono-Regular, Menlo, monospace; background: #eff1f3;
  padding: .1rem .3rem; border-radius: 4px; }
"""


def audit_markdown(record: AuditRecord) -> str:
    """The record as Markdown: summary per use case, flags, changes, approvals, reproduction."""
    return _header(record) + _history(record)


def _header(record: AuditRecord) -> str:
    return (
        f"# Audit record for `{record.rev[:12]}`\n\n"
        f"Revision `{record.rev}`, committed {record.commit.committed_at} by "
        f"{_cell(record.commit.author.name)}. First-parent history: {record.history} "
        f"commit{'s' if record.history != 1 else ''} since the root commit "
        f"`{record.root.sha[:12]}` ({record.root.committed_at}). Dates are UTC; events are "
        "ordered by their place on the first-parent line, not by author dates.\n\n"
    )


def _history(record: AuditRecord) -> str:
    approvals = None
    if record.approvals is not None:
        approvals = {p.number: p for p in record.approvals}
    lines = ["## Use cases", ""]
    if record.selections:
        lines += _table(_SUMMARY_HEADER, [_summary_row(s, approvals) for s in record.selections])
    else:
        lines.append("No selection files at this revision.")
    lines += ["", "## Flags", ""]
    flags = [(s.id, f) for s in record.selections for f in s.flags]
    lines += [f"- **{_cell(sid)}** — {_cell(flag.message)}" for sid, flag in flags] or [
        "None: every policy predates its evidence and every declared candidate had results."
    ]
    if record.unchecked:
        lines += ["", "Not checked:", ""]
        lines += [f"- {_cell(note)}" for note in record.unchecked]
    lines += ["", "## Changes", ""]
    lines += _changes(record.selections)
    lines += ["", "## Rubrics, tasks, pins and eval sets", ""]
    lines += _file_changes(record.files)
    lines += ["", "## Evidence bought again", ""]
    lines += _rebuys(record.rebuys)
    lines += ["", "## DVC remote", ""]
    lines += _remotes(record.remotes)
    lines += ["", "## Approvals", ""]
    if record.approvals is None:
        lines.append(_NOT_CHECKED)
    else:
        lines += _approvals(record.approvals)
    lines += ["", "### Waivers", ""]
    lines += _waivers(record)
    if record.lookup_errors:
        lines += ["", "Pull requests of these commits could not be looked up:", ""]
        lines += [f"- {_cell(e)}" for e in record.lookup_errors]
    lines += ["", "## Reproduction", ""]
    lines += _reproduction(record.rev, record.reproduction)
    return "\n".join(lines) + "\n"


def write_html(
    record: AuditRecord,
    directory: Path,
    decisions: Sequence[SelectionEvidence] | str = (),
) -> list[Path]:
    """Write ``index.html``: the Markdown rendered for offline reading, no scripts, no fetches.

    ``decisions`` (each use case's evidence at the record's revision, or why it could not be
    read) come first: declared and recommended candidates, gates, results on all items and
    the chart, inline; then the history.
    """
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    # Images would fetch from the network; the page must render with nothing but itself.
    md.disable("image")
    body = md.render(_header(record)) + _decisions(md, decisions) + md.render(_history(record))
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


def _decisions(md: MarkdownIt, decisions: Sequence[SelectionEvidence] | str) -> str:
    """The decisions section of the HTML page; charts are our own SVG, inlined."""
    if isinstance(decisions, str):
        why = _cell(decisions)
        rendered: str = md.render(f"## Decisions\n\nNot readable at this revision: {why}\n")
        return rendered
    if not decisions:
        return ""
    out = [md.render("## Decisions\n")]
    for ev in decisions:
        out.append(f'<section class="decision" id="decision-{html.escape(ev.selection_id)}">\n')
        out.append(md.render(headline(ev)))
        out.append(f'<figure class="chart">\n{chart(ev)}</figure>\n</section>\n')
    return "".join(out)


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


def _file_changes(files: tuple[FileChange, ...]) -> list[str]:
    if not files:
        return ["No changes."]
    rows = [
        [
            f.commit.committed_at,
            f"`{f.commit.sha[:12]}`",
            f"#{f.commit.pr}" if f.commit.pr else "—",
            _person_list(f.merged_authors, f.commit.author),
            f"{_FILE_LABELS[f.kind]} {_cell(f.id)}",
            _cell(", ".join(f.selections)) if f.selections else "none",
            _cell("; ".join(f.summary)),
            _cell(f.commit.subject),
        ]
        for f in files
    ]
    return _table(_FILE_HEADER, rows)


def _rebuys(rebuys: tuple[Rebuy, ...]) -> list[str]:
    if not rebuys:
        return [f"None: {REBOUGHT_LOG} records no run that bought evidence again."]
    lines = [
        "Results whose responses or per-item records were in DVC objects no remote held "
        "(a fork's run that never pushed, merged) cannot be reproduced; a later run bought "
        "that evidence again. Results recorded before the re-buy rest on the lost objects.",
        "",
    ]
    rows = [
        [
            r.commit.committed_at,
            f"`{r.commit.sha[:12]}`",
            f"#{r.commit.pr}" if r.commit.pr else "—",
            _person_list(r.authors, r.commit.author),
            _cell(", ".join(r.cells)),
            "; ".join(f"{_cell(o.path)} (md5 {_cell(o.md5)})" for o in r.objects),
            "; ".join(sorted({_came(o.introduced) for o in r.objects})),
        ]
        for r in rebuys
    ]
    return lines + _table(_REBUY_HEADER, rows)


def _remotes(changes: tuple[RemoteChange, ...]) -> list[str]:
    if not changes:
        return ["No default DVC remote is set in .dvc/config at any commit of this history."]
    lines = [
        "Where the evidence behind the results' pointers is kept: the default remote of "
        ".dvc/config, each time it was set, moved or removed (credentials in its settings "
        "are redacted).",
        "",
    ]
    rows = [
        [
            r.commit.committed_at,
            f"`{r.commit.sha[:12]}`",
            f"#{r.commit.pr}" if r.commit.pr else "—",
            _person_list(r.authors, r.commit.author),
            _remote(r.before),
            _remote(r.after),
            _cell(r.commit.subject),
        ]
        for r in changes
    ]
    return lines + _table(_REMOTE_HEADER, rows)


def _remote(remote: DefaultRemote | None) -> str:
    """A remote as committed by anyone: escaped, its credentials already redacted."""
    if remote is None:
        return "none"
    text = _cell(remote.describe())
    if remote.credentials:
        names = ", ".join(remote.credentials)
        text += f"; credentials committed in .dvc/config: {_cell(names)} (values redacted)"
    return text


def _came(commit: CommitInfo | None) -> str:
    """A commit from git (hex SHA, UTC date, a PR number) as Markdown: nothing to escape."""
    if commit is None:
        return "unknown"
    pr = f"#{commit.pr}, " if commit.pr else ""
    return f"{pr}`{commit.sha[:12]}`, {commit.committed_at}"


def _waivers(record: AuditRecord) -> list[str]:
    waivers = [(s.id, w) for s in record.selections for w in s.waivers]
    if not waivers:
        return ["No waivers at this revision."]
    checks: dict[tuple[str, str], WaiverCheck] = {
        (c.selection, c.candidate): c for c in record.waiver_checks or ()
    }
    rows = []
    for sid, waiver in waivers:
        check = checks.get((sid, waiver.candidate))
        pr = waiver.commit.pr
        rows.append(
            [
                _cell(sid),
                _cell(waiver.candidate),
                _cell(waiver.approver),
                _cell(waiver.approver_login) if waiver.approver_login else "—",
                f"#{pr}" if pr else "—",
                _cell(check.login) if check and check.login else "—",
                _cell(check.rule) if check else "—",
                _WAIVER_LABELS[check.status] if check else "not checked",
                _cell(check.message) if check else "—",
            ]
        )
    header = (
        "selection",
        "candidate",
        "approver",
        "approver login",
        "PR",
        "matched reviewer",
        "matched by",
        "verdict",
        "detail",
    )
    return _table(header, rows)


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
        f"Different: {len(differing)} of {plural(total, 'recorded cell')} "
        f"{'does' if len(differing) == 1 else 'do'} not reproduce ({command} "
        "lists every difference).",
        "",
    ]
    return lines + _table(
        ("cell", "differences"), [[_cell(c.cell), str(c.differences)] for c in differing]
    )


def _commit_ref(commit: CommitInfo) -> str:
    return f"{commit.committed_at} in `{commit.sha[:12]}`"


def _by(change: Change, *, email: bool = False) -> str:
    return _person_list(change.merged_authors, change.commit.author, email=email)


def _person_list(authors: tuple[Person, ...], committer: Person, *, email: bool = True) -> str:
    """Who wrote a change, and who merged it when a merge commit brought it in."""
    who = _person(committer, email)
    if authors:
        return f"{', '.join(_person(p, email) for p in authors)} (merged by {who})"
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
