"""When each use case's criteria were fixed, from git: the commits that last changed its
policy and its rubric, and whether that came before the first evidence they judge.

The rule for "after the evidence" is ``audit/fixed.py``'s, which the audit record applies
to history and this module to the working tree: the report and the audit say the same
thing in the same words. The report is
written from the working tree, usually before the commit that records it, so what is said
here must stay true once that commit is made: the first evidence is not named by its commit
(it may be the one being made), and criteria that differ from HEAD's are "not committed
yet", judged as the audit will judge them once they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import git

from evalreg.audit.commits import CommitInfo
from evalreg.audit.fixed import Edit, Moment, criteria_after_evidence, declared_after_evidence
from evalreg.audit.record import AuditRecord, SelectionAudit, build_audit, parse_version
from evalreg.cells import RESULTS_DIR, cells, use_cases_of
from evalreg.errors import UsageError
from evalreg.registry import schema
from evalreg.registry.loader import Registry
from evalreg.registry.tree import GitTree
from evalreg.results.records import read_summary

M = TypeVar("M", schema.Selection, schema.Rubric, schema.Task)


@dataclass(frozen=True)
class Dated:
    """One part of the criteria and the commit that last changed it."""

    what: str
    """``policy`` or ``rubric``."""
    id: str | None
    """The rubric's id."""
    commit: CommitInfo | None
    """None: it differs from HEAD's (``uncommitted``), or no commit holds it."""
    uncommitted: bool = False


@dataclass(frozen=True)
class CriteriaDates:
    """A use case's criteria against its evidence, as git tells it."""

    parts: tuple[Dated, ...]
    late: str | None = None
    """Why the criteria count as changed after the evidence, when they do."""
    declared: str | None = None
    """Why the selection counts as declared after its evidence, when it does."""
    unknown: str | None = None
    """Why git cannot date anything here (no repository, no commit)."""


def criteria_dates(registry: Registry) -> dict[str, CriteriaDates]:
    """Every selection's ``CriteriaDates``. A registry read at a revision is dated at that
    revision; one read from the working tree at HEAD, with its uncommitted criteria named."""
    # Both trees of a repository know its directory and a revision's tree its commit; a
    # registry assembled some other way has no history to read.
    root, rev = getattr(registry.tree, "root", None), getattr(registry.tree, "rev", None)
    try:
        if not isinstance(root, Path):
            raise UsageError("the registry was not read from a repository")
        if rev is None and _unborn(root):
            raise UsageError("nothing is committed yet")
        record = build_audit(root, rev or "HEAD", verify=False)
        at = GitTree(root, record.rev)
    except UsageError as exc:
        return {sid: CriteriaDates((), unknown=str(exc)) for sid in registry.selections}
    by_id = {s.id: s for s in record.selections}
    results = {
        sid
        for c in cells(registry)
        if read_summary(registry.tree, c)
        for sid in use_cases_of(registry, c)
    }
    out = {}
    for sid, selection in registry.selections.items():
        rubric = registry.tasks[selection.task].rubric
        changed = {} if rev else _uncommitted(registry, at, sid, rubric)
        audit = by_id.get(sid)
        dates = _dates(audit, record, rubric, changed, sid in results)
        declared = next(
            (
                f.message
                for f in (audit.flags if audit else ())
                if f.kind == "declared_after_evidence"
            ),
            None,
        )
        if declared is None and not rev and "policy" in changed and not changed["policy"]:
            declared = _declared_here(root, record, selection)
        out[sid] = CriteriaDates(dates.parts, dates.late, declared)
    return out


def _declared_here(root: Path, record: AuditRecord, selection: schema.Selection) -> str | None:
    """A selection created in the working tree over results HEAD already holds."""
    paths = [f"{RESULTS_DIR}/{selection.task}/{c.id}.json" for c in selection.candidates]
    with git.Repo(root) as repo:
        found = [
            (p, repo.git.log("--diff-filter=A", "--format=%H %ct", "HEAD", "--", p)) for p in paths
        ]
    added = [(p, line.split()) for p, out in found for line in out.splitlines()[-1:]]
    if not added:
        return None
    cells = [p.removeprefix(f"{RESULTS_DIR}/").removesuffix(".json") for p, _ in added]
    sha, when = min((fields for _, fields in added), key=lambda f: int(f[1]))
    at = datetime.fromtimestamp(int(when), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    evidence = Moment(record.history, sha[:12], at)
    return declared_after_evidence(_here(record), evidence, cells)


def _here(record: AuditRecord) -> Moment:
    """The working tree: after HEAD."""
    return Moment(record.history + 1, "the working tree")


def _unborn(root: Path) -> bool:
    """A git repository without a commit (``build_audit`` names anything else wrong)."""
    try:
        with git.Repo(root) as repo:
            return not repo.head.is_valid()
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return False


def _dates(
    audit: SelectionAudit | None,
    record: AuditRecord,
    rubric: str,
    uncommitted: dict[str, bool],
    has_results: bool,
) -> CriteriaDates:
    """``uncommitted``: each part that differs from HEAD's, and whether HEAD has it at all."""
    policy = [c.commit for c in audit.changes if c.kind == "policy"] if audit else []
    rulers = [
        f.commit
        for f in record.files
        if audit is not None
        and f.criteria
        and audit.id in f.selections
        and (f.kind == "task" or f.id == rubric)
    ]
    parts = tuple(
        Dated(what, ident, None, True)
        if what in uncommitted
        else Dated(what, ident, max(found, key=lambda c: c.position, default=None))
        for what, ident, found in (("policy", None, policy), ("rubric", rubric, rulers))
    )
    late = next(
        (f.message for f in (audit.flags if audit else ()) if f.kind == "criteria_after_evidence"),
        None,
    )
    here = _here(record)
    parts_changed = {"policy": "policy", "rubric": f"rubric {rubric}"}
    edits = [
        Edit(here, parts_changed[what], not existed, "the working tree (not committed yet)")
        for what, existed in uncommitted.items()
    ]
    committed = audit.evidence if audit else None
    if committed is not None:
        evidence: Moment | None = Moment(
            committed.position, committed.sha[:12], committed.committed_at
        )
    else:
        evidence = here if has_results else None
    if late is None and edits and evidence is not None:
        late = criteria_after_evidence(evidence, edits)
    return CriteriaDates(parts, late)


def _uncommitted(registry: Registry, at: GitTree, sid: str, rubric: str) -> dict[str, bool]:
    """The criteria parts that differ between the working tree and the commit ``at``, each
    with whether the commit has that part at all (an edit, not a creation)."""
    out = {}
    selection = _committed(at, registry.file_of("selections", sid), "selections", schema.Selection)
    if selection is None or selection.policy != registry.selections[sid].policy:
        out["policy"] = selection is not None
    task_id = registry.selections[sid].task
    task = _committed(at, registry.file_of("tasks", task_id), "tasks", schema.Task)
    committed = _committed(at, registry.file_of("rubrics", rubric), "rubrics", schema.Rubric)
    if committed != registry.rubrics[rubric] or task is None or task.rubric != rubric:
        out["rubric"] = committed is not None and task is not None
    return out


def _committed(at: GitTree, path: str, kind: str, model: type[M]) -> M | None:
    if not at.is_file(path):
        return None
    parsed = parse_version(at.read(path), path, kind, model)
    return None if isinstance(parsed, str) else parsed
