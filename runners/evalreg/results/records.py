"""Cell results: per-item records, per-slice aggregates and their canonical files.

Canonical means: sorted keys, items in id order, no wall-clock time, no absolute paths,
integers where possible (micro-dollars, milliseconds), floats rounded to 6 places, no NaN.
Grading the same responses twice gives byte-identical files.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from evalreg._version import __version__
from evalreg.canonical import canonical_bytes, loads_finite
from evalreg.cells import Cell
from evalreg.errors import RegistryError
from evalreg.registry.diagnostics import Finding
from evalreg.registry.tree import Tree
from evalreg.store.segments import collection_paused, load_json

SUMMARY_SCHEMA = 2
"""2 added ``samples``: every sample's level and verdicts, one character each."""
ALL = "all"
LEVELS = ("correct", "acceptable", "unacceptable")
LEVEL_CHARS = {"correct": "c", "acceptable": "a", "unacceptable": "u"}
ERROR_CHAR = "e"
"""The level character of a sample without verdicts (a provider or judge error)."""
OTHER_CHAR = "?"
"""The level character of a graded sample with no known level."""
VERDICT_CHARS = {True: "1", False: "0"}
ABSENT_CHAR = "."
"""The verdict character of a criterion that did not grade a sample."""
UNGRADED_CHAR = "-"
"""The verdict character of a criterion that applies to a sample but did not grade it (a
human criterion with too few grades for the response)."""
UNGRADED_FIELD = "ungraded"
"""The record field listing the criteria that apply but did not grade the sample (present
only when some did not)."""


def rounded(x: float) -> float:
    if not math.isfinite(x):
        raise ValueError("results never hold NaN or infinity")
    return round(x, 6) + 0.0  # + 0.0 turns -0.0 into 0.0


def percentile(values: Sequence[int], p: float) -> int:
    """Nearest-rank percentile of integers (an observed value, so always an integer)."""
    if not values:
        return 0
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def aggregate(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Totals for one slice: levels, criteria, errors, latency, tokens and cost.

    Per criterion: ``applicable`` counts its verdicts, ``passed`` those that passed, and
    ``ungraded`` (only when non-zero) the samples it applies to without a verdict."""
    items = set()
    levels = dict.fromkeys(LEVELS, 0)
    criteria: dict[str, list[int]] = {}
    latencies: list[int] = []
    scores: list[float] = []
    tokens = dict.fromkeys(("input", "output", "reasoning"), 0)
    cost = spend = 0
    judge_cost: int | None = None
    for r in records:
        items.add(r["item"])
        judge = r.get("judge_cost_micro_usd")
        if judge is not None:
            judge_cost = (judge_cost or 0) + judge
        spend += r["cost_micro_usd"] + (judge or 0)
        if r["error"] is not None:
            continue
        level = r["level"]
        if level in levels:
            levels[level] += 1
        for cid, verdict in r["criteria"].items():
            counts = criteria.get(cid)
            if counts is None:
                counts = criteria[cid] = [0, 0, 0]
            counts[0] += 1
            counts[1] += bool(verdict["passed"])
        for cid in r.get(UNGRADED_FIELD, ()):
            criteria.setdefault(cid, [0, 0, 0])[2] += 1
        latencies.append(r["latency_ms"])
        scores.append(r["score"])
        used = r["tokens"]
        for kind in tokens:
            tokens[kind] += used[kind]
        cost += r["cost_micro_usd"]
    return {
        "samples": len(records),
        "items": len(items),
        "graded": len(scores),
        "errors": len(records) - len(scores),
        "levels": levels,
        "criteria": {cid: criterion_entry(counts) for cid, counts in sorted(criteria.items())},
        # math.fsum is correctly rounded: the same float on every Python version (the
        # built-in sum of floats changed in 3.12) and in any order.
        "score_sum": rounded(math.fsum(scores)),
        "latency_ms": {"p50": percentile(latencies, 50), "p95": percentile(latencies, 95)},
        "tokens": tokens,
        "cost_micro_usd": cost,
        **judge_spend(judge_cost, spend),
    }


def criterion_entry(counts: Sequence[int]) -> dict[str, int]:
    """A criterion's entry in a slice's aggregate, from its verdicts, passes and ungraded
    samples (``ungraded`` is written only when non-zero, so rubrics graded in full keep
    their bytes)."""
    applicable, passed, ungraded = counts
    entry = {"applicable": applicable, "passed": passed}
    if ungraded:
        entry["ungraded"] = ungraded
    return entry


def coverage_counts(totals: dict[str, Any], criteria: Iterable[str]) -> dict[str, tuple[int, int]]:
    """Per criterion of ``criteria`` in a slice's aggregate: (graded, applicable) samples."""
    out = {}
    for cid in criteria:
        counts = totals["criteria"].get(cid) or {}
        graded = int(counts.get("applicable", 0))
        out[cid] = graded, graded + int(counts.get("ungraded", 0))
    return out


def judge_spend(judge_cost: int | None, spend: int) -> dict[str, int]:
    """The judge's share of a slice's cost, for a slice a judge graded (``judge_cost`` is
    None otherwise, and a cell without a judge keeps the fields it always had).

    ``cost_micro_usd`` is the candidate's cost over graded samples: what production pays,
    where there is no judge. ``spend_micro_usd`` is what the eval spent on the slice: the
    candidate's response to every sample (one whose judge failed included) and every
    judge response, each at its own pin's price.
    """
    if judge_cost is None:
        return {}
    return {"judge_cost_micro_usd": judge_cost, "spend_micro_usd": spend}


def spend_micro_usd(totals: dict[str, Any]) -> int:
    """What a cell (or slice) cost to run: its candidate and judge responses."""
    return int(totals.get("spend_micro_usd", totals["cost_micro_usd"]))


def slices_of(records: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        out[ALL].append(r)
        for tag in r["tags"]:
            out[tag].append(r)
    return dict(out)


_ITEM_LINE = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


def item_line(record: dict[str, Any]) -> bytes:
    """``record``'s line in an items file (sorted keys, no spaces, UTF-8), no newline."""
    try:
        # The same bytes as the json encoder's for every value canonical JSON can hold.
        return canonical_bytes(record)
    except ValueError:  # NaN or infinity, which the json encoder writes (or a lone surrogate)
        return _ITEM_LINE(record).encode()


def items_bytes(records: Sequence[dict[str, Any]]) -> bytes:
    """Per-item records, one canonical JSON object a line, in (item, sample) order."""
    ordered = sorted(records, key=_item_order)
    return b"".join(item_line(r) + b"\n" for r in ordered)


def _item_order(record: dict[str, Any]) -> tuple[str, int]:
    return record["item"], record["sample"]


def read_items(data: bytes) -> list[dict[str, Any]]:
    """The records of an items file (``items_bytes``'s output), in file order."""
    with collection_paused():
        return [load_json(line) for line in data.splitlines() if line.strip()]


def level_char(record: dict[str, Any]) -> str:
    """A sample's level as one character: ``c``/``a``/``u``, ``e`` for an error, ``?`` for
    no known level."""
    if record["error"] is not None:
        return ERROR_CHAR
    return LEVEL_CHARS.get(record["level"], OTHER_CHAR)


def verdict_char(record: dict[str, Any], criterion: str) -> str:
    """A criterion's verdict on a sample as one character: ``1`` passed, ``0`` failed,
    ``.`` does not apply (or an error), ``-`` applies but not graded."""
    verdict = record["criteria"].get(criterion)
    if verdict is not None:
        return VERDICT_CHARS[bool(verdict["passed"])]
    return UNGRADED_CHAR if criterion in record.get(UNGRADED_FIELD, ()) else ABSENT_CHAR


def sample_columns(records: Sequence[dict[str, Any]], criteria: Sequence[str]) -> dict[str, Any]:
    """Every sample's level and criterion verdicts, one character each, in items-file order
    (item id, then sample): what metrics and paired comparisons need, without the records."""
    ordered = sorted(records, key=_item_order)
    return {
        "levels": "".join(map(level_char, ordered)),
        "criteria": {
            cid: "".join(verdict_char(r, cid) for r in ordered) for cid in sorted(criteria)
        },
    }


def summary_for(
    cell: Cell,
    fingerprint: str,
    parts: dict[str, Any],
    evalset_path: str,
    evalset_md5: str,
    records: Sequence[dict[str, Any]],
    items_data: bytes,
) -> dict[str, Any]:
    by_slice = slices_of(records)
    totals = aggregate(by_slice.pop(ALL, []))
    return {
        "schema_version": SUMMARY_SCHEMA,
        "cell": {"task": cell.task_id, "candidate": cell.candidate.id, "pin": cell.candidate.pin},
        "fingerprint": fingerprint,
        "fingerprint_parts": parts,
        "evalreg_version": __version__,
        "evalset": {"path": evalset_path, "md5": evalset_md5},
        "items_file": {
            "path": cell.items_path,
            "md5": hashlib.md5(items_data, usedforsecurity=False).hexdigest(),
        },
        "totals": totals,
        "slices": {name: aggregate(rs) for name, rs in sorted(by_slice.items())},
        "samples": sample_columns(records, [c.id for c in cell.rubric.criteria]),
    }


def as_schema(summary: dict[str, Any], version: object) -> dict[str, Any]:
    """``summary`` as schema ``version`` recorded it, to compare with a summary written by
    an older evalreg: version 1 had no ``samples``. Other versions: ``summary`` itself."""
    if version == 1:
        older = {k: v for k, v in summary.items() if k != "samples"}
        older["schema_version"] = 1
        return older
    return summary


def summary_bytes(summary: dict[str, Any]) -> bytes:
    return (
        json.dumps(summary, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    ).encode()


def read_summary(tree: Tree, cell: Cell) -> dict[str, Any] | None:
    """``cell``'s committed summary, or None if it has none; a file that is not a summary
    (damaged, truncated, edited by hand) raises ``RegistryError`` naming it."""
    path = cell.summary_path
    if not tree.is_file(path):
        return None
    try:
        data = loads_finite(tree.read(path).decode("utf-8"))
    except json.JSONDecodeError as exc:
        raise _not_a_summary(path, f"invalid JSON: {exc.msg}", exc.lineno, exc.colno) from None
    except (ValueError, RecursionError) as exc:  # not UTF-8, NaN, nested too deep
        raise _not_a_summary(path, str(exc) or type(exc).__name__) from None
    if not isinstance(data, dict):
        raise _not_a_summary(path, "expected a JSON object")
    for key, kind in _SUMMARY_FIELDS.items():
        if key in data and not isinstance(data[key], kind):
            raise _not_a_summary(path, f"{key!r} is not a {kind.__name__}")
    return data


_SUMMARY_FIELDS = {
    "fingerprint": str,
    "fingerprint_parts": dict,
    "evalreg_version": str,
    "cell": dict,
    "evalset": dict,
    "items_file": dict,
    "totals": dict,
    "slices": dict,
    "samples": dict,
}
"""The type of each field a summary may hold, for the readers that rely on it."""


def _not_a_summary(path: str, problem: str, line: int = 0, col: int = 0) -> RegistryError:
    return RegistryError(
        [
            Finding(
                path,
                line,
                col,
                f"not a results summary ({problem}): restore it (`git checkout -- {path}`), "
                "or delete it and run the cell again (`evalreg run`)",
            )
        ]
    )
