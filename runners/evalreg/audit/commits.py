"""A commit as the audit record names it: who, when, through which pull request."""

from __future__ import annotations

from dataclasses import dataclass

import git

from evalreg.audit.introduced import PrSource


def blob_at(commit: git.Commit, path: str) -> git.Blob | None:
    """The file at ``path`` in ``commit``, if there is one."""
    try:
        found = commit.tree / path
    except KeyError:
        return None
    return found if isinstance(found, git.Blob) else None


@dataclass(frozen=True)
class Person:
    name: str
    email: str


@dataclass(frozen=True)
class CommitInfo:
    """One commit on the first-parent line; ``position`` 1 is the root commit."""

    sha: str
    position: int
    subject: str
    author: Person
    authored_at: str
    committed_at: str
    """When the commit was made on this line (UTC): the date that orders events."""
    pr: int | None
    """The pull request the commit came through, if known (see ``pr_source``)."""
    merge: bool
    pr_source: PrSource | None = None
    """How ``pr`` was found: a merge commit's or squash commit's subject, or GitHub's
    commit→pull-request lookup."""
