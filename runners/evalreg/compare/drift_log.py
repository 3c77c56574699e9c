"""The drift log, ``reports/drift.jsonl``: one canonical JSON line per cell a drift check
looked at (``evalreg drift --record``), kept in git; its one writer and its one reader, and
the schedule the repository's drift workflow runs on.

A line holds what the check concluded (when, drifted or not, how many samples agreed), never
an output: what a purge erases must not survive in the log.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from evalreg.canonical import canonical_bytes
from evalreg.errors import RegistryError
from evalreg.registry.diagnostics import Finding
from evalreg.registry.tree import Tree

if TYPE_CHECKING:
    from evalreg.compare.drift import DriftReport

DRIFT_LOG = "reports/drift.jsonl"
WORKFLOWS = ".github/workflows"


@dataclass(frozen=True)
class DriftCheck:
    """One cell in one logged drift check."""

    line: int
    cell: str
    checked_at: str
    """UTC, ``2026-12-01T06:17:00Z``."""
    result: str
    """``drifted``, ``no drift``, ``not checked`` (blocked) or ``skipped``."""
    compared: int
    same_level: int
    detail: str
    """Why it drifted, was blocked or skipped; empty otherwise."""


def log_lines(report: DriftReport, now: datetime | None = None) -> bytes:
    """The log lines of ``report``, checked at ``now`` (default: the clock)."""
    at = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    out = b""
    for c in report.cells:
        if c.drifted:
            result, detail = "drifted", "; ".join(c.reasons)
        elif c.blocked is not None:
            result, detail = "not checked", c.blocked
        elif c.skipped is not None:
            result, detail = "skipped", c.skipped
        else:
            result, detail = "no drift", ""
        entry = {
            "cell": c.cell,
            "checked_at": at,
            "compared": c.compared,
            "detail": detail,
            "result": result,
            "same_level": c.same_level,
            "sample": report.sample,
            "seed": report.seed,
            "threshold": report.threshold,
        }
        out += canonical_bytes(entry) + b"\n"
    return out


def append_log(root: Path, report: DriftReport, now: datetime | None = None) -> Path:
    """Append ``report`` to the drift log under ``root``; returns the log's path."""
    path = root / DRIFT_LOG
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as f:
        f.write(log_lines(report, now))
    return path


def read_drift_log(tree: Tree) -> list[DriftCheck]:
    """The logged checks in ``tree``, in log order (none without a log); a line that is not
    one raises ``RegistryError`` at its line number."""
    if not tree.is_file(DRIFT_LOG):
        return []
    out = []
    for number, line in enumerate(tree.read(DRIFT_LOG).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            out.append(
                DriftCheck(
                    number,
                    str(entry["cell"]),
                    _timestamp(entry["checked_at"]),
                    _result(entry["result"]),
                    int(entry["compared"]),
                    int(entry["same_level"]),
                    str(entry.get("detail") or ""),
                )
            )
        except (ValueError, RecursionError, KeyError, TypeError, AttributeError) as exc:
            problem = f"not a drift record ({type(exc).__name__}: {exc})"
            raise RegistryError([Finding(DRIFT_LOG, number, 0, problem)]) from None
    return out


def last_checks(tree: Tree) -> dict[str, DriftCheck]:
    """Each cell's latest logged check (by time, then by place in the log)."""
    latest: dict[str, DriftCheck] = {}
    for check in read_drift_log(tree):
        seen = latest.get(check.cell)
        if seen is None or (check.checked_at, check.line) > (seen.checked_at, seen.line):
            latest[check.cell] = check
    return latest


def _timestamp(value: object) -> str:
    text = str(value)
    datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")  # ValueError names the bad value
    return text


def _result(value: object) -> str:
    text = str(value)
    if text not in ("drifted", "no drift", "not checked", "skipped"):
        raise ValueError(f"unknown result {text!r}")
    return text


@dataclass(frozen=True)
class DriftWorkflow:
    path: str
    schedules: tuple[str, ...]
    """Its ``on.schedule`` cron expressions (none: it runs only when started by hand)."""


def drift_workflow(tree: Tree) -> DriftWorkflow | None:
    """The first workflow under ``.github/workflows`` that runs ``evalreg drift``, if any.

    A workflow file that cannot be parsed is not one (GitHub would not run it either).
    """
    yaml = YAML(typ="safe", pure=True)
    for name in tree.list_dir(WORKFLOWS):
        if not name.endswith((".yml", ".yaml")):
            continue
        path = f"{WORKFLOWS}/{name}"
        text = tree.read(path).decode("utf-8", "replace")
        if "evalreg drift" not in text:
            continue
        try:
            doc = yaml.load(text)
        except YAMLError:
            continue
        triggers = doc.get("on", doc.get(True)) if isinstance(doc, dict) else None
        schedule = triggers.get("schedule") if isinstance(triggers, dict) else None
        crons = tuple(
            str(entry["cron"])
            for entry in (schedule if isinstance(schedule, list) else [])
            if isinstance(entry, dict) and "cron" in entry
        )
        return DriftWorkflow(path, crons)
    return None
