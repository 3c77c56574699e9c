"""Which first-parent commit brought a file's current version in, and through which pull
request: what ``check --remote`` and ``reproduce`` say of evidence a merge lost."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

PrSource = Literal["merge", "squash", "api"]

_MERGE_PR = re.compile(r"^Merge pull request #([0-9]+) from \S")
_SQUASH_PR = re.compile(r"\(#([0-9]+)\)\s*$")


def pull_request_in(subject: str) -> tuple[int, PrSource] | None:
    """The pull request a commit's subject names: a merge commit's "Merge pull request #N
    from …", or a squash merge's "… (#N)"."""
    if found := _MERGE_PR.match(subject):
        return int(found.group(1)), "merge"
    if found := _SQUASH_PR.search(subject):
        return int(found.group(1)), "squash"
    return None


@dataclass(frozen=True)
class Introduced:
    """The first-parent commit of HEAD that last changed a file, and its pull request."""

    sha: str
    subject: str
    pr: int | None

    def describe(self) -> str:
        pr = f"pull request #{self.pr}, " if self.pr is not None else ""
        return f"{pr}commit {self.sha[:12]} ({self.subject!r})"

    def as_dict(self) -> dict[str, object]:
        return {"commit": self.sha, "subject": self.subject, "pr": self.pr}


def introduced(root: Path, paths: list[str], rev: str = "HEAD") -> dict[str, Introduced]:
    """By path, the commit on ``rev``'s first-parent line that last changed it (a merge
    commit for what a pull request brought in); paths git has no history of are left out."""
    import git

    out = {}
    with git.Repo(root) as repo:
        for path in paths:
            try:
                line = repo.git.log(
                    "--first-parent", "-1", "--format=%H%x00%s", rev, "--", path
                ).strip()
            except git.GitCommandError:
                continue
            if "\0" not in line:
                continue
            sha, subject = line.split("\0", 1)
            found = pull_request_in(subject)
            out[path] = Introduced(sha, subject, found[0] if found else None)
    return out
