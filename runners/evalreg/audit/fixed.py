"""Whether a use case's criteria were fixed before the evidence they judge: the one rule
the audit record and the governance report both apply, to commits on main, to the commits
of a merged pull request and to the working tree alike, in the same words.

The evidence is the first moment a result summary of one of the selection's cells exists.
A change to the criteria (the selection's policy, its task's rubric, or which rubric the
task uses) at a later moment counts as made after the evidence; so does one at that very
moment unless it created the criteria, since the results were in the working tree when the
criteria were edited. A selection created when results of its cells already existed is
declared after its evidence: its criteria were chosen with the numbers in view.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

CRITERIA_AFTER = "criteria changed after the evidence they judge first existed"
DECLARED_AFTER = "selection declared after its evidence"


@dataclass(frozen=True)
class Moment:
    """A place in the order judged: a commit's on the first-parent line, inside a merged
    pull request, or the working tree after HEAD."""

    order: int
    name: str
    """How a message names it: a commit's short SHA, or "the working tree"."""
    when: str = ""
    """Its date, when it has one."""

    @property
    def label(self) -> str:
        return f"{self.name} ({self.when})" if self.when else self.name


@dataclass(frozen=True)
class Edit:
    """A change to one part of the criteria."""

    at: Moment
    part: str
    """``policy``, or the file changed (``rubric labels``, ``task faq``)."""
    created: bool
    """The change brought the part into being (no earlier version to edit)."""
    where: str
    """The change as a message shows it: commit, pull request, date and what changed."""


def late(evidence: Moment, edits: Iterable[Edit]) -> list[Edit]:
    """The edits of ``edits`` that count as made after ``evidence``."""
    return [
        e
        for e in edits
        if e.at.order > evidence.order or (e.at.order == evidence.order and not e.created)
    ]


def criteria_after_evidence(evidence: Moment, edits: Iterable[Edit]) -> str | None:
    """Why the criteria count as changed after the evidence, or None when they do not."""
    found = late(evidence, edits)
    if not found:
        return None
    parts = []
    policy = [e.where for e in found if e.part == "policy"]
    if policy:
        parts.append("policy changed in " + ", ".join(policy))
    parts += [f"{e.part} changed in {e.where}" for e in found if e.part != "policy"]
    message = f"{CRITERIA_AFTER}: results first in {evidence.label}; " + "; ".join(parts)
    if any(e.at.order == evidence.order for e in found):
        message += (
            f" (a change in {evidence.name} itself counts: its results were in the working "
            "tree when the criteria were edited)"
        )
    return message


def declared_after_evidence(declared: Moment, evidence: Moment, cells: Sequence[str]) -> str | None:
    """Why a selection counts as declared after its evidence (results of ``cells`` existed
    at ``evidence``, before ``declared``, where it was created), or None."""
    if evidence.order >= declared.order:
        return None
    return (
        f"{DECLARED_AFTER}: created in {declared.label}, when results of "
        f"{', '.join(cells)} already existed (since {evidence.label}), so its criteria were "
        "chosen with those numbers in view"
    )
