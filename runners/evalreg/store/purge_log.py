"""The purge log, ``reports/purges.jsonl``: one canonical JSON line a purge, kept in git, and
its one reader (freshness, reproduce and status act on what it says)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from evalreg.errors import RegistryError
from evalreg.registry.diagnostics import Finding
from evalreg.registry.tree import Tree

PURGE_LOG = "reports/purges.jsonl"


@dataclass(frozen=True)
class LoggedPurge:
    """What a line of :data:`PURGE_LOG` says that others act on."""

    line: int
    item: str
    evalset: str
    reason: str
    at: str | None
    segments_removed: tuple[str, ...]
    segment_written: str | None
    results: tuple[str, ...] = ()
    """md5s of the per-item records graded on the purged responses."""


def read_log(tree: Tree) -> list[LoggedPurge]:
    """The purges logged in ``tree``, oldest first (none without a log); a line that is
    not one raises ``RegistryError`` at its line number."""
    if not tree.is_file(PURGE_LOG):
        return []
    out = []
    for number, line in enumerate(tree.read(PURGE_LOG).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            out.append(
                LoggedPurge(
                    number,
                    str(entry["item"]),
                    str(entry["evalset"]),
                    str(entry["reason"]),
                    entry.get("at"),
                    tuple(entry.get("segments_removed") or ()),
                    entry.get("segment_written"),
                    tuple(str(md5) for md5 in (entry.get("results") or {}).values()),
                )
            )
        except (ValueError, RecursionError, KeyError, TypeError, AttributeError) as exc:
            problem = f"not a purge record ({type(exc).__name__}: {exc})"
            raise RegistryError([Finding(PURGE_LOG, number, 0, problem)]) from None
    return out
