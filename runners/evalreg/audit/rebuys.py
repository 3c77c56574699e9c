"""Evidence bought again, for the audit: each re-buy that ``reports/rebought.jsonl`` gained
along the first-parent line, the commit that brought it (who ran it, and when), and for each
object it names, the commit that had brought in the pointer to it (the merge of a fork's
pull request, usually) — so the record says which merged evidence never reached a remote."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Protocol

import git

from evalreg.audit.commits import CommitInfo, Person, blob_at
from evalreg.store.rebought_log import NOT_A_LINE, REBOUGHT_LOG, LostObject, parse_line


class Commits(Protocol):
    """What the audit's history knows of commits (``record._History``)."""

    repo: git.Repo

    def info(self, commit: git.Commit, position: int) -> CommitInfo: ...

    def merged_authors(self, commit: git.Commit, path: str) -> tuple[Person, ...]: ...


@dataclass(frozen=True)
class LostPointer:
    """An object a re-buy named lost, and where its pointer came from."""

    path: str
    md5: str
    introduced: CommitInfo | None
    """The first-parent commit that last changed the pointer before the re-buy (it set the
    md5 no remote held); None when git has no such commit."""


@dataclass(frozen=True)
class Rebuy:
    """A run that bought again the evidence of ``cells``, whose objects were on no remote."""

    commit: CommitInfo
    """The first-parent commit that added the log line: who and when."""
    authors: tuple[Person, ...]
    """When ``commit`` is a merge: the authors of the merged commits that wrote the line."""
    cells: tuple[str, ...]
    objects: tuple[LostPointer, ...]

    @property
    def pull_requests(self) -> tuple[int, ...]:
        """The pull requests that brought in the lost pointers."""
        return tuple(
            sorted({o.introduced.pr for o in self.objects if o.introduced and o.introduced.pr})
        )


class RebuyTrail:
    """Follows ``reports/rebought.jsonl`` along the first-parent line, commit by commit."""

    def __init__(self, history: Commits) -> None:
        self.history = history
        self.blob: str | None = None
        self.lines: Counter[bytes] = Counter()
        self.positions: dict[str, tuple[git.Commit, int]] = {}
        self.rebuys: list[Rebuy] = []

    def step(self, commit: git.Commit, position: int) -> None:
        self.positions[commit.hexsha] = (commit, position)
        blob = blob_at(commit, REBOUGHT_LOG)
        sha = blob.hexsha if blob is not None else None
        if sha == self.blob:
            return
        self.blob = sha
        data = blob.data_stream.read() if blob is not None else b""
        lines = Counter(line.strip() for line in data.splitlines() if line.strip())
        new = lines - self.lines
        self.lines = lines
        for line in sorted(new.elements()):
            entry = _entry(line)
            if entry is None:
                continue  # not a record: `evalreg check` names it; nothing to tell here
            cells, objects = entry
            self.rebuys.append(
                Rebuy(
                    self.history.info(commit, position),
                    self.history.merged_authors(commit, REBOUGHT_LOG),
                    cells,
                    tuple(
                        LostPointer(o.path, o.md5, self._introduced(commit, o.path))
                        for o in objects
                    ),
                )
            )

    def _introduced(self, commit: git.Commit, path: str) -> CommitInfo | None:
        if not commit.parents:
            return None
        try:
            sha = self.history.repo.git.log(
                "--first-parent", "-1", "--format=%H", commit.parents[0].hexsha, "--", path
            ).strip()
        except git.GitCommandError:
            return None
        if sha not in self.positions:
            return None
        return self.history.info(*self.positions[sha])


def _entry(line: bytes) -> tuple[tuple[str, ...], tuple[LostObject, ...]] | None:
    try:
        return parse_line(line)
    except NOT_A_LINE:
        return None
