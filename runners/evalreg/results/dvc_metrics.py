"""A cell's DVC metrics file: its rates and cost per slice, for ``dvc metrics show/diff``.

The summary holds everything a result is, provenance included (fingerprints, per-sample
verdict columns, latency), which is what ``reproduce`` compares and the wrong thing to
read in a ``dvc metrics`` table. For each summary ``run`` writes
``reports/metrics/<task>/<candidate>.json``: per slice (``all`` first, then every tag),
the items, the shares of graded samples at each level and the error rate; for ``all``,
also what the candidate cost (in all and per 1,000 items), what the eval spent where a
judge graded, and each criterion's pass rate. It is a pure function of the summary, so it is
reproduced with it, and it carries no policy: the pass rate is ``correct_rate`` or
``acceptable_rate``, as the use case's ``pass_level`` says. Rates are per sample (with one
sample an item, per item, as the report gives them), rounded to 4 places.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from evalreg.results.records import ALL, CellSummary, SliceAggregate

__all__ = ["metrics_bytes", "metrics_of"]

_RATE_PLACES = 4


def _share(k: int, n: int) -> float | None:
    return round(k / n, _RATE_PLACES) + 0.0 if n else None


def _slice(aggregate: SliceAggregate, whole: bool) -> dict[str, Any]:
    samples = int(aggregate.get("samples", 0))
    graded = int(aggregate.get("graded", 0))
    levels: Mapping[str, int] = aggregate.get("levels") or {}
    correct = int(levels.get("correct", 0))
    out: dict[str, Any] = {
        "items": int(aggregate.get("items", 0)),
        "correct_rate": _share(correct, graded),
        "acceptable_rate": _share(correct + int(levels.get("acceptable", 0)), graded),
        "unacceptable_rate": _share(int(levels.get("unacceptable", 0)), graded),
        "error_rate": _share(samples - graded, samples),
    }
    if whole:
        cost = int(aggregate.get("cost_micro_usd", 0))
        out["cost_usd"] = cost / 1_000_000
        if graded:
            out["cost_per_1k_items_usd"] = round(cost / graded / 1_000, 6) + 0.0
        spend = aggregate.get("spend_micro_usd")
        if spend is not None:
            out["eval_spend_usd"] = int(spend) / 1_000_000
        out["criteria"] = {
            cid: _share(int(c.get("passed", 0)), int(c.get("applicable", 0)))
            for cid, c in sorted((aggregate.get("criteria") or {}).items())
        }
    return {k: v for k, v in out.items() if v is not None}


def metrics_of(summary: CellSummary) -> dict[str, Any]:
    """The metrics file's content: slice ``all`` from the totals, then each tag's slice."""
    totals = summary.get("totals") or {}
    out = {ALL: _slice(totals, whole=True)}
    for name, aggregate in sorted((summary.get("slices") or {}).items()):
        out[name] = _slice(aggregate, whole=False)
    return out


def metrics_bytes(summary: CellSummary) -> bytes:
    """The metrics file of ``summary``, canonical: same summary, same bytes."""
    text = json.dumps(metrics_of(summary), indent=2, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode()
