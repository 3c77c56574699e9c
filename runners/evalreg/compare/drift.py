"""``evalreg drift``: re-ask live models a seeded sample of recorded requests and compare."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from evalreg.compare.diff import snippet
from evalreg.errors import UsageError
from evalreg.providers import get_provider
from evalreg.providers.base import api_key, credentials_problem
from evalreg.providers.fetch import Job, JobError, fetch
from evalreg.providers.http import HttpLayer
from evalreg.registry import schema
from evalreg.registry.loader import Registry
from evalreg.results.records import ItemRecord, rounded
from evalreg.runner.grading import CellGrader, cell_grader
from evalreg.runner.planning import CellPlan, RunOptions, cell_jobs, prepare
from evalreg.store.segments import ResponseStore
from evalreg.text.numbers import percent

DRIFT_SCHEMA = 1
MAX_EXAMPLES = 5
"""Disagreeing samples shown per cell."""

Change = tuple[str | None, str | None]
"""A value as recorded and as returned now (``None``: the provider reported none)."""
Sampled = tuple[schema.Item, int, Job]


@dataclass(frozen=True)
class Example:
    """One sample whose live response was graded differently from the stored one."""

    item: str
    sample: int
    stored_level: str | None
    live_level: str | None
    stored_text: str
    live_text: str


@dataclass
class CellDrift:
    """What re-asking one cell's model showed, or why the cell was not asked."""

    cell: str
    pin: str
    model: str | None
    skipped: str | None = None
    """Why the cell has nothing to check: a python pin, or no results to compare with yet."""
    blocked: str | None = None
    """Why a cell that should be checked was not: no key here, or no request was answered."""
    population: int = 0
    """Current requests of the cell with a stored response: what the sample is drawn from."""
    keys: list[str] = field(default_factory=list)
    """The sampled store keys, sorted."""
    compared: int = 0
    """Samples with a live response, both responses graded."""
    exact: int = 0
    same_level: int = 0
    criteria: Counter[str] = field(default_factory=Counter)
    """Criterion id -> samples whose pass/fail verdict differs."""
    levels: Counter[Change] = field(default_factory=Counter)
    models: Counter[Change] = field(default_factory=Counter)
    fingerprints: Counter[Change] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    """Samples not compared, by provider error (kind and HTTP status) or ``ungradable``."""
    examples: list[Example] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    """Why the cell drifted; empty when it did not."""

    @property
    def drifted(self) -> bool:
        return bool(self.reasons)

    @property
    def exact_rate(self) -> float | None:
        return self.exact / self.compared if self.compared else None

    @property
    def level_agreement(self) -> float | None:
        return self.same_level / self.compared if self.compared else None


@dataclass
class DriftReport:
    """Every selected cell's drift check, with the parameters that make it repeatable."""

    sample: int
    seed: int
    threshold: float
    cells: list[CellDrift] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """1 a cell drifted; else 2 a cell that should be checked was not; else 0."""
        if any(c.drifted for c in self.cells):
            return 1
        return 2 if any(c.blocked for c in self.cells) else 0


def sample_keys(keys: Iterable[str], n: int, seed: int) -> list[str]:
    """Up to ``n`` of ``keys`` drawn with ``seed``, sorted: the same keys on every Python.

    Only ``Random.random()`` is used: for an integer seed its stream is the one the standard
    library promises to keep (``sample`` and ``shuffle`` carry no such promise). Each key in
    sorted order gets one draw and the ``n`` lowest draws win, so a larger ``n`` keeps every
    key a smaller one drew.
    """
    rng = random.Random(seed)
    ranked = sorted((rng.random(), key) for key in sorted(set(keys)))
    return sorted(key for _draw, key in ranked[:n])


def drift(
    root: Path,
    *,
    sample: int = 50,
    seed: int = 0,
    cells: Sequence[str] | None = None,
    threshold: float = 0.1,
    concurrency: int = 16,
) -> DriftReport:
    """Re-send a seeded sample of each cell's recorded requests and compare the answers.

    Development cells with results and an HTTP pin are asked; a key not set here blocks a
    cell. Each sampled request is a current request of the cell whose response is stored;
    its body goes out byte for byte as recorded (the store key is the hash of those bytes).
    Live responses, and the judge verdicts on them, stay in memory: drift never writes to
    the response store. Human grades, given for the stored output, carry over to the live
    one. ``cells`` (``TASK/CANDIDATE`` ids) narrows the check. A cell drifts when the levels
    of more than ``threshold`` of its compared samples differ, or the returned model name
    does.
    """
    if sample < 1:
        raise UsageError(f"--sample {sample}: ask at least 1 request a cell")
    if not 0.0 <= threshold <= 1.0:
        raise UsageError(f"--threshold {threshold}: a rate between 0 and 1")
    if concurrency < 1:
        raise UsageError(f"concurrency {concurrency}: at least 1 request in flight")
    root = root.resolve()
    # ``force`` plans fresh cells too: every cell with results is a candidate for drift.
    prepared = prepare(root, RunOptions(force=True))
    registry, store, plans = prepared.registry, prepared.store, prepared.plans
    wanted = set(cells or ())
    unknown = wanted - {p.status.cell.id for p in plans}
    if unknown:
        known = ", ".join(p.status.cell.id for p in plans) or "none"
        raise UsageError(f"unknown cell {', '.join(sorted(unknown))} (cells: {known})")
    report = DriftReport(sample, seed, threshold)
    # Judges read their stored verdicts, and their verdicts on live outputs kept in memory
    # beside them (a judge request is keyed by the output it grades, so sharing is safe).
    overlay = store.overlay()
    asked: list[tuple[CellDrift, CellGrader, list[Sampled]]] = []
    for plan in plans:
        c = plan.status.cell
        if wanted and c.id not in wanted:
            continue
        result = CellDrift(c.id, c.candidate.pin, c.pin.model)
        report.cells.append(result)
        result.skipped = _nothing_to_check(plan, root)
        if result.skipped is None:
            result.blocked = _missing_key(plan, registry)
        if result.skipped is not None or result.blocked is not None:
            continue
        population: dict[str, Sampled] = {}
        provider = get_provider(c.pin.provider, root)
        for item, index, job in cell_jobs(c, provider, plan.items):
            if job.key in store:
                population.setdefault(job.key, (item, index, job))
        result.population = len(population)
        if not population:
            result.skipped = (
                "no stored response matches the current requests: run evalreg run first"
            )
            continue
        result.keys = sample_keys(population, sample, seed)
        grader = cell_grader(c, registry, overlay, root)
        asked.append((result, grader, [population[k] for k in result.keys]))
    layer = partial(HttpLayer, ca_bundle=registry.settings.network.ca_bundle, root=root)
    live, failed = asyncio.run(_ask(asked, overlay, concurrency, layer))
    for result, grader, chosen in asked:
        for item, index, job in chosen:
            _compare(result, grader, item, index, job.key, store.get(job.key), live, failed)
        _decide(result, threshold)
    return report


def _nothing_to_check(plan: CellPlan, root: Path) -> str | None:
    c = plan.status.cell
    if not get_provider(c.pin.provider, root).http:
        return (
            f"a {c.pin.provider} pin runs code in this repository, whose source is part of "
            "the cell's fingerprint: it cannot drift under the same name"
        )
    if plan.status.state == "pending":
        return "no results yet: run evalreg run first"
    return None


def _missing_key(plan: CellPlan, registry: Registry) -> str | None:
    c = plan.status.cell
    for pin_id in (c.candidate.pin, *c.judges):
        pin = registry.pins[pin_id]
        try:
            api_key(pin)
        except UsageError as exc:
            return str(exc)
        if pin.provider != "python":
            problem = credentials_problem(get_provider(pin.provider), pin)
            if problem is not None:
                return problem
    return None


async def _ask(
    asked: list[tuple[CellDrift, CellGrader, list[Sampled]]],
    overlay: ResponseStore,
    concurrency: int,
    layer: Callable[[], HttpLayer],
) -> tuple[ResponseStore, dict[str, str]]:
    """Live responses by key and why each failed request failed; nothing is written.

    Judge requests for the live outputs go into ``overlay`` (the stored verdicts answer
    every output that did not change).
    """
    live = ResponseStore()
    jobs = {job.key: job for _r, _g, chosen in asked for _i, _s, job in chosen}
    async with layer() as http:
        report = await fetch(jobs.values(), live, None, http, concurrency=concurrency)
        judge_jobs = [
            judged
            for _result, grader, chosen in asked
            for item, index, job in chosen
            if (answer := live.get(job.key)) is not None
            for judged in grader.judge_jobs(item, index, answer)
        ]
        if judge_jobs:
            await fetch(judge_jobs, overlay, None, http, concurrency=concurrency)
    return live, {e.key: _error_label(e) for e in report.errors}


def _error_label(error: JobError) -> str:
    # Kind and status only: a provider's message can quote what it was sent.
    return error.kind if error.status is None else f"{error.kind} {error.status}"


def _compare(
    result: CellDrift,
    grader: CellGrader,
    item: schema.Item,
    index: int,
    key: str,
    stored: dict[str, Any] | None,
    live: ResponseStore,
    failed: dict[str, str],
) -> None:
    answer = live.get(key)
    if answer is None:
        result.errors[failed.get(key, "no response")] += 1
        return
    before = grader.record(item, index, key, stored, None)
    after = grader.record(item, index, key, answer, None)
    if stored is None or before["error"] or after["error"]:
        result.errors["ungradable"] += 1
        return
    result.compared += 1
    old, new = stored["response"], answer["response"]
    if old["text"] == new["text"]:
        result.exact += 1
    if old.get("model") != new.get("model"):
        result.models[(old.get("model"), new.get("model"))] += 1
    if old.get("system_fingerprint") != new.get("system_fingerprint"):
        result.fingerprints[(old.get("system_fingerprint"), new.get("system_fingerprint"))] += 1
    differing = [
        cid
        for cid in sorted(before["criteria"].keys() | after["criteria"].keys())
        if _passed(before, cid) != _passed(after, cid)
    ]
    result.criteria.update(differing)
    if before["level"] == after["level"]:
        result.same_level += 1
    else:
        result.levels[(before["level"], after["level"])] += 1
    if (differing or before["level"] != after["level"]) and len(result.examples) < MAX_EXAMPLES:
        result.examples.append(
            Example(
                item.id,
                index,
                before["level"],
                after["level"],
                snippet(old["text"]) or "",
                snippet(new["text"]) or "",
            )
        )


def _passed(record: ItemRecord, criterion: str) -> bool | None:
    verdict = record["criteria"].get(criterion)
    return None if verdict is None else verdict["passed"]


def _decide(result: CellDrift, threshold: float) -> None:
    if result.compared == 0:
        result.blocked = f"none of the {len(result.keys)} sampled requests was answered and graded"
    agreement = result.level_agreement
    if agreement is not None and 1.0 - agreement > threshold:
        result.reasons.append(
            f"levels differ on {percent(1.0 - agreement)} of {result.compared} compared "
            f"samples (threshold {percent(threshold)})"
        )
    changed = sum(result.models.values())
    if changed:
        result.reasons.append(
            f"the provider named a different model on {changed} of {result.compared} samples"
        )


# ---------------------------------------------------------------- JSON
def drift_json(report: DriftReport) -> dict[str, Any]:
    """The report as JSON-ready data (``schema_version`` 1), rates rounded to 6 places."""
    return {
        "schema_version": DRIFT_SCHEMA,
        "sample": report.sample,
        "seed": report.seed,
        "threshold": report.threshold,
        "exit_code": report.exit_code,
        "cells": [_cell_json(c) for c in report.cells],
    }


def _rate(x: float | None) -> float | None:
    return None if x is None else rounded(x)


def _changes(counts: Counter[Change]) -> list[dict[str, Any]]:
    return [{"from": old, "to": new, "count": n} for (old, new), n in ordered(counts)]


def ordered(counts: Counter[Change]) -> list[tuple[Change, int]]:
    return sorted(counts.items(), key=lambda e: (-e[1], e[0][0] or "", e[0][1] or ""))


def _cell_json(c: CellDrift) -> dict[str, Any]:
    return {
        "cell": c.cell,
        "pin": c.pin,
        "model": c.model,
        "skipped": c.skipped,
        "blocked": c.blocked,
        "population": c.population,
        "keys": c.keys,
        "compared": c.compared,
        "exact_match_rate": _rate(c.exact_rate),
        "level_agreement_rate": _rate(c.level_agreement),
        "criteria_disagreements": dict(sorted(c.criteria.items())),
        "level_changes": _changes(c.levels),
        "model_changes": _changes(c.models),
        "fingerprint_changes": _changes(c.fingerprints),
        "errors": dict(sorted(c.errors.items())),
        "examples": [asdict(e) for e in c.examples],
        "drifted": c.drifted,
        "reasons": c.reasons,
    }
