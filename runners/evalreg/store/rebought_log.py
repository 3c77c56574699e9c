"""The re-bought log, ``reports/rebought.jsonl``: one canonical JSON line each time a run
bought again the evidence of DVC objects no remote held, kept in git, and its one reader
(the audit and ``reproduce`` name the commit that re-bought what a merge lost)."""

from __future__ import annotations

import json
from dataclasses import dataclass

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
            entry = json.loads(line)
            out.append(
                Rebought(
                    number,
                    tuple(str(c) for c in entry["cells"]),
                    tuple(LostObject(str(o["path"]), str(o["md5"])) for o in entry["objects"]),
                )
            )
        except (ValueError, RecursionError, KeyError, TypeError, AttributeError) as exc:
            problem = f"not a re-buy record ({type(exc).__name__}: {exc})"
            raise RegistryError([Finding(REBOUGHT_LOG, number, 0, problem)]) from None
    return out
