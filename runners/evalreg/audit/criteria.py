"""When each use case's criteria were fixed, from git: the commits that last changed its
policy and its rubric, the first commit holding the evidence they judge, and whether the
criteria came first.

The rule for "after the evidence" is the audit record's (``audit/record.py``). The report
is written from the working tree: criteria that differ there from the commit they are
compared at are not dated (git has no commit for them yet) and say so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from evalreg.audit.record import (
    AuditRecord,
    CommitInfo,
    FileChange,
    SelectionAudit,
    build_audit,
    parse_version,
)
from evalreg.errors import UsageError
from evalreg.registry import schema
from evalreg.registry.loader import Registry
from evalreg.registry.tree import GitTree

M = TypeVar("M", schema.Selection, schema.Rubric, schema.Task)


@dataclass(frozen=True)
class Dated:
    """One part of the criteria (the policy, or a rubric) and the commit that last changed
    it at or before the decision; None when git has no such commit."""

    what: str
    """``policy`` or ``rubric``."""
    id: str | None
    """The rubric's id."""
    commit: CommitInfo | None


@dataclass(frozen=True)
class CriteriaDates:
    """A use case's criteria against its evidence, as git tells it."""

    parts: tuple[Dated, ...]
    evidence: CommitInfo | None
    """The first commit holding a result summary of one of its cells."""
    decision: CommitInfo | None
    """The commit that declared the candidate selected now."""
    late: str | None = None
    """Why the criteria count as changed after the evidence, when they do."""
    after_decision: tuple[CommitInfo, ...] = ()
    """Commits that changed the criteria after the decision."""
    uncommitted: tuple[str, ...] = ()
    """Parts (``policy``, ``rubric``) whose working-tree version differs from the last
    commit's."""
    unknown: str | None = None
    """Why git cannot date anything here (no repository, no commit)."""

    @property
    def before_evidence(self) -> bool:
        """The criteria provably came first: dated, unchanged since, not flagged."""
        return (
            self.unknown is None
            and not self.uncommitted
            and self.late is None
            and all(p.commit is not None for p in self.parts)
        )


def criteria_dates(registry: Registry) -> dict[str, CriteriaDates]:
    """Every selection's ``CriteriaDates``. A registry read at a revision is dated at that
    revision; one read from the working tree at HEAD, with its uncommitted criteria named."""
    # Both trees of a repository know its directory and a revision's tree its commit; a
    # registry assembled some other way has no history to read.
    root, rev = getattr(registry.tree, "root", None), getattr(registry.tree, "rev", None)
    try:
        if not isinstance(root, Path):
            raise UsageError("the registry was not read from a repository")
        record = build_audit(root, rev or "HEAD", verify=False)
        at = GitTree(root, record.rev)
    except UsageError as exc:
        return {sid: CriteriaDates((), None, None, unknown=str(exc)) for sid in registry.selections}
    by_id = {s.id: s for s in record.selections}
    out = {}
    for sid, selection in registry.selections.items():
        rubric = registry.tasks[selection.task].rubric
        audit = by_id.get(sid)
        if audit is None:
            out[sid] = CriteriaDates(
                (Dated("policy", None, None), Dated("rubric", rubric, None)),
                None,
                None,
                uncommitted=("policy", "rubric"),
            )
            continue
        changed = () if rev else _uncommitted(registry, at, sid, rubric)
        out[sid] = _dates(audit, record, rubric, changed)
    return out


def _dates(
    audit: SelectionAudit, record: AuditRecord, rubric: str, uncommitted: tuple[str, ...]
) -> CriteriaDates:
    decision = audit.last_selected_change
    until = decision.commit.position if decision else record.history
    policy = [c.commit for c in audit.changes if c.kind == "policy"]
    rulers = [f for f in record.files if f.criteria and audit.id in f.selections]
    late = next((f.message for f in audit.flags if f.kind == "criteria_after_evidence"), None)
    after = sorted(
        {c.sha: c for c in [*policy, *(f.commit for f in rulers)] if c.position > until}.values(),
        key=lambda c: c.position,
    )
    return CriteriaDates(
        (
            Dated("policy", None, _last(policy, until)),
            Dated("rubric", rubric, _last([f.commit for f in _rubric(rulers, rubric)], until)),
        ),
        audit.evidence,
        decision.commit if decision else None,
        late,
        tuple(after),
        uncommitted,
    )


def _rubric(changes: Sequence[FileChange], rubric: str) -> list[FileChange]:
    """Changes to ``rubric`` itself, and the task switching to a rubric."""
    return [f for f in changes if f.kind == "task" or f.id == rubric]


def _last(commits: Sequence[CommitInfo], until: int) -> CommitInfo | None:
    return max((c for c in commits if c.position <= until), key=lambda c: c.position, default=None)


def _uncommitted(registry: Registry, at: GitTree, sid: str, rubric: str) -> tuple[str, ...]:
    """The criteria parts that differ between the working tree and the commit ``at``."""
    out = []
    selection = _committed(at, registry.file_of("selections", sid), "selections", schema.Selection)
    if selection is None or selection.policy != registry.selections[sid].policy:
        out.append("policy")
    committed = _committed(at, registry.file_of("rubrics", rubric), "rubrics", schema.Rubric)
    task = _committed(
        at, registry.file_of("tasks", registry.selections[sid].task), "tasks", schema.Task
    )
    if committed != registry.rubrics[rubric] or task is None or task.rubric != rubric:
        out.append("rubric")
    return tuple(out)


def _committed(at: GitTree, path: str, kind: str, model: type[M]) -> M | None:
    if not at.is_file(path):
        return None
    parsed = parse_version(at.read(path), path, kind, model)
    return None if isinstance(parsed, str) else parsed
