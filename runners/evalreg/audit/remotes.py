"""Changes of the default DVC remote, for the audit: each first-parent commit that pointed
``.dvc/config``'s default remote somewhere else, who made it, through which pull request,
and the old and new URL with any credential in them redacted.

The remote is part of the record: the results are only as good as the objects behind their
pointers, and those are wherever the remote says. ``.dvc/config.local`` is never committed,
so it is no part of the history.
"""

from __future__ import annotations

from dataclasses import dataclass

import git

from evalreg.audit.commits import CommitInfo, Person, blob_at
from evalreg.audit.rebuys import Commits
from evalreg.compare.remote import DVC_CONFIG, ConfigUnreadable, DefaultRemote, default_remote


@dataclass(frozen=True)
class RemoteChange:
    """The default remote moved (or was first set, or removed) at one first-parent commit."""

    commit: CommitInfo
    authors: tuple[Person, ...]
    """When ``commit`` is a merge: the authors of the merged commits that changed the config."""
    before: DefaultRemote | None
    after: DefaultRemote | None


class RemoteTrail:
    """Follows ``.dvc/config``'s default remote along the first-parent line."""

    def __init__(self, history: Commits) -> None:
        self.history = history
        self.blob: str | None = None
        self.remote: DefaultRemote | None = None
        self.changes: list[RemoteChange] = []

    def step(self, commit: git.Commit, position: int) -> None:
        blob = blob_at(commit, DVC_CONFIG)
        sha = blob.hexsha if blob is not None else None
        if sha == self.blob:
            return
        self.blob = sha
        text = blob.data_stream.read().decode("utf-8", "replace") if blob is not None else None
        try:
            remote = default_remote(text)
        except ConfigUnreadable:
            return  # unreadable here: the next readable version is compared with the last
        if _location(remote) == _location(self.remote):
            self.remote = remote  # its name, or a committed credential, may have changed
            return
        self.changes.append(
            RemoteChange(
                self.history.info(commit, position),
                self.history.merged_authors(commit, DVC_CONFIG),
                self.remote,
                remote,
            )
        )
        self.remote = remote


def _location(remote: DefaultRemote | None) -> tuple[str | None, str | None] | None:
    return remote.location if remote is not None else None
