"""The re-bought log, ``reports/rebought.jsonl``: one canonical JSON line each time a run
bought again the evidence of DVC objects no remote held, kept in git, and its one reader
(the audit and ``reproduce`` name the commit that re-bought what a merge lost)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from evalreg.canonical import canonical_bytes
from evalreg.errors import RegistryError
from evalreg.registry.diagnostics import Finding
from evalreg.registry.tree import Tree

REBOUGHT_LOG = "reports/rebought.jsonl"


@dataclass(frozen=True, order=True)
class LostObject:
    """A DVC object a pointer names that neither this machine nor the remote holds."""

    path: str
    """The pointer (``….dvc``), relative to the repository."""
    md5: str


@dataclass(frozen=True)
class Rebought:
    """What a line of :data:`REBOUGHT_LOG` says."""

    line: int
    cells: tuple[str, ...]
    objects: tuple[LostObject, ...]


def rebought_line(cells: list[str], objects: list[LostObject]) -> bytes:
    """The log line of a run that re-bought ``cells``, whose evidence was in ``objects``.
    It holds no time: the commit that adds it says who and when."""
    entry = {
        "cells": sorted(cells),
        "objects": [{"md5": o.md5, "path": o.path} for o in sorted(set(objects))],
        "reason": "on no DVC remote",
    }
    return canonical_bytes(entry) + b"\n"


NOT_A_LINE = (ValueError, RecursionError, KeyError, TypeError, AttributeError)
"""What :func:`parse_line` raises for a line that is not a re-buy record."""


def parse_line(line: str | bytes) -> tuple[tuple[str, ...], tuple[LostObject, ...]]:
    """A log line's cells and objects; raises one of :data:`NOT_A_LINE` when it is not one."""
    entry = json.loads(line)
    return (
        tuple(str(c) for c in entry["cells"]),
        tuple(LostObject(str(o["path"]), str(o["md5"])) for o in entry["objects"]),
    )


def read_log(tree: Tree) -> list[Rebought]:
    """The re-buys logged in ``tree``, oldest first (none without a log); a line that is not
    one raises ``RegistryError`` at its line number."""
    if not tree.is_file(REBOUGHT_LOG):
        return []
    out = []
    for number, line in enumerate(tree.read(REBOUGHT_LOG).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(Rebought(number, *parse_line(line)))
        except NOT_A_LINE as exc:
            problem = f"not a re-buy record ({type(exc).__name__}: {exc})"
            raise RegistryError([Finding(REBOUGHT_LOG, number, 0, problem)]) from None
    return out


@dataclass(frozen=True)
class LostAt:
    """An object a revision's results rest on, lost, and the re-buy that replaced it."""

    object: LostObject
    rebuy: Rebought
    commit: str | None
    """The commit that added the re-buy's log line; None while it is not committed."""
    author: str | None = None
    date: str | None = None
    """The commit's author date, UTC, ``YYYY-MM-DDTHH:MM:SSZ``."""

    def describe(self) -> str:
        o = self.object
        if self.commit is None:
            by = "by a run not committed yet"
        else:
            by = f"at commit {self.commit[:12]} by {self.author} on {self.date}"
        return (
            f"{o.path} (md5 {o.md5}) is on no DVC remote: its evidence was bought again "
            f"{by} ({REBOUGHT_LOG} line {self.rebuy.line})"
        )


def lost_objects(log: list[Rebought]) -> dict[str, Rebought]:
    """By md5, the first re-buy in ``log`` that named the object lost."""
    out: dict[str, Rebought] = {}
    for entry in log:
        for o in entry.objects:
            out.setdefault(o.md5, entry)
    return out


def rebought_at(root: Path, lost: list[tuple[LostObject, Rebought]]) -> list[LostAt]:
    """Each of ``lost`` with the commit that logged its re-buy (``git blame`` of the log's
    line at HEAD: the commit that wrote the line, on whichever branch it was made)."""
    import git

    commits: dict[int, tuple[str | None, str | None, str | None]] = {}
    with git.Repo(root) as repo:
        for line in sorted({entry.line for _, entry in lost}):
            try:
                porcelain = repo.git.blame(
                    "--porcelain", "-L", f"{line},{line}", "HEAD", "--", REBOUGHT_LOG
                )
            except git.GitCommandError:  # the line is not committed yet
                commits[line] = (None, None, None)
                continue
            head, *fields = porcelain.splitlines()
            values = dict(f.split(" ", 1) for f in fields if " " in f and not f.startswith("\t"))
            sha = head.split()[0]
            if set(sha) == {"0"}:
                commits[line] = (None, None, None)
                continue
            when = datetime.fromtimestamp(int(values.get("author-time", "0")), UTC)
            commits[line] = (sha, values.get("author", ""), when.strftime("%Y-%m-%dT%H:%M:%SZ"))
    return [
        LostAt(o, entry, *commits[entry.line])
        for o, entry in sorted(lost, key=lambda pair: pair[0])
    ]
