"""A cell's graded samples as columns: what metrics, comparisons and calibration read.

Per-item records are JSON objects; reading every metric of every slice from them walks
each record dozens of times. ``Outcomes`` holds, once, one array entry per sample (its
item, level and criterion verdicts) and one list entry per item (id, cluster, tags), so a
slice is a mask and a rate is a count.

Two sources give the same columns: the per-item records (``from_records``), and a cell
summary's ``samples`` field read together with the eval set it was graded on
(``from_summary``), which needs no per-item file at all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from evalreg.evalsets.evalset import EvalSet, item_content
from evalreg.registry import schema
from evalreg.results.records import (
    ABSENT_CHAR,
    ALL,
    ERROR_CHAR,
    LEVEL_CHARS,
    LEVELS,
    UNGRADED_CHAR,
    UNGRADED_FIELD,
    VERDICT_CHARS,
    CellSummary,
    ItemRecord,
    SliceAggregate,
    percentile,
)
from evalreg.store.segments import load_json

ERROR = len(LEVELS)
"""The level code of a sample that got no verdicts (a provider or judge error)."""
_LEVEL_CODE = {name: code for code, name in enumerate(LEVELS)}
_UNLEVELLED = ERROR + 1
"""A graded sample whose level is missing or unknown: counted as graded, never as passing."""

PASSED, FAILED, ABSENT, UNGRADED = 1, 0, -1, -2
"""Criterion codes: the criterion passed, failed, does not apply to this sample (or it is
an error), or applies but did not grade it (a human criterion with too few grades)."""

Mask = npt.NDArray[np.bool_]
Codes = npt.NDArray[np.int8]
Ints = npt.NDArray[np.int64]

# Byte value → code, for reading a summary's character columns in one vectorised step.
_LEVEL_TABLE = np.full(256, _UNLEVELLED, dtype=np.int8)
for _name, _char in LEVEL_CHARS.items():
    _LEVEL_TABLE[ord(_char)] = _LEVEL_CODE[_name]
_LEVEL_TABLE[ord(ERROR_CHAR)] = ERROR
_VERDICT_TABLE = np.full(256, ABSENT, dtype=np.int8)
_VERDICT_TABLE[ord(VERDICT_CHARS[True])] = PASSED
_VERDICT_TABLE[ord(VERDICT_CHARS[False])] = FAILED
_VERDICT_TABLE[ord(ABSENT_CHAR)] = ABSENT
_VERDICT_TABLE[ord(UNGRADED_CHAR)] = UNGRADED


@dataclass(frozen=True)
class Usage:
    """Latency and cost over one slice's graded samples."""

    graded: int
    latency_p50_ms: int
    latency_p95_ms: int
    cost_micro_usd: int
    timed: int
    """Graded samples with a measured latency (not bought in a batch): what the
    percentiles are over; none means the slice's latency is unknown."""


class Items:
    """A cell's items: ids, clusters and tags, and what is derived from them once (which
    slices each item is in, whether it has a cluster of its own). Cells graded on the same
    eval set share one ``Items``."""

    def __init__(self, ids: list[str], clusters: list[str], tags: list[tuple[str, ...]]) -> None:
        self.ids = ids
        self.clusters = clusters
        """Per item, its cluster, or its id when it declares none."""
        self.tags = tags
        self.own_cluster: Mask = np.array(
            [c == i for c, i in zip(clusters, ids, strict=True)], dtype=bool
        )
        """Per item, whether it is alone in its cluster (declares none)."""
        self.alone = bool(self.own_cluster.all())
        """Whether no item declares a cluster."""
        self._slices: dict[str, Mask] = {}

    def slices(self) -> dict[str, Mask]:
        """Per slice (``all`` and every tag, sorted), which items are in it."""
        if not self._slices:
            # Items share a few sets of tags: each item's set as a code, and a slice the
            # items whose code is one of the sets holding its tag (no list of indices).
            codes: dict[tuple[str, ...], int] = {}
            n = len(self.ids)
            column = np.fromiter(
                (codes.setdefault(tags, len(codes)) for tags in self.tags), np.int32, count=n
            )
            holding: dict[str, list[int]] = {}
            for tags, code in codes.items():
                for tag in tags:
                    # An item tagged ``all`` is in ``all`` as every item is, as the tally's
                    # totals count it: not the only one.
                    if tag != ALL:
                        holding.setdefault(tag, []).append(code)
            out: dict[str, Mask] = {}
            if n:
                out[ALL] = np.ones(n, dtype=bool)
            for tag, held in holding.items():
                out[tag] = np.isin(column, held)
            self._slices.update(sorted(out.items()))
        return self._slices


_EVALSET_ITEMS: list[tuple[Sequence[schema.Item], Items]] = []
"""The ``Items`` of the last few eval sets read (by identity of their item sequence)."""


def _evalset_items(evalset: EvalSet) -> Items:
    for seen, built in _EVALSET_ITEMS:
        if seen is evalset.items:
            return built
    built = Items(*evalset.identities())
    _EVALSET_ITEMS.insert(0, (evalset.items, built))
    del _EVALSET_ITEMS[4:]
    return built


class Outcomes:
    """Every sample of one cell, as columns (samples in items-file order)."""

    def __init__(
        self,
        items: Items,
        item: Ints,
        level: Codes,
        criteria: dict[str, Codes],
        *,
        content: Callable[[], list[str]],
        source: str | None = None,
        usage: Callable[[str, Mask], Usage],
        key: Callable[[int], str | None],
    ) -> None:
        self.items = items
        self.ids = items.ids
        self.clusters = items.clusters
        self.tags = items.tags
        self.item = item
        """Per sample, its item's index into ``ids``."""
        self.level = level
        """Per sample, the index of its level in ``LEVELS``, ``ERROR`` or unknown."""
        self.criteria = criteria
        """Per criterion id, per sample: ``PASSED``, ``FAILED``, ``ABSENT`` or ``UNGRADED``."""
        self.source = source
        """The eval set's md5 when the items are exactly that eval set's (then two outcomes
        with the same source have the same items with the same content)."""
        self._content = content
        self._usage = usage
        self._key = key
        self.memo: dict[Any, Any] = {}
        """What has been computed from these outcomes, for callers that ask twice."""

    def __len__(self) -> int:
        return len(self.level)

    @property
    def graded(self) -> Mask:
        """Per sample, whether it has verdicts (not an error)."""
        graded: Mask = self.level != ERROR
        return graded

    def content(self) -> list[str]:
        """Per item, its content hash (pairs items across revisions)."""
        return self._content()

    def key(self, row: int) -> str | None:
        """Sample ``row``'s response store key (may read the per-item records)."""
        return self._key(row)

    def usage(self, name: str, graded: Mask) -> Usage:
        """Latency and cost of slice ``name``, whose graded samples are ``graded``."""
        return self._usage(name, graded)

    def slices(self) -> dict[str, Mask]:
        """Per slice (``all`` and every tag, sorted), which items are in it."""
        return self.items.slices()

    def first_rows(self) -> Ints:
        """Per item, the row of its first sample (-1 for an item without samples)."""
        first = np.full(len(self.ids), -1, dtype=np.int64)
        # Assigned in reverse, so the earliest row of each item is written last.
        rows = np.arange(len(self.item) - 1, -1, -1, dtype=np.int64)
        first[self.item[rows]] = rows
        return first

    def level_name(self, row: int) -> str | None:
        """Sample ``row``'s level (None for an error or no known level)."""
        code = int(self.level[row])
        return LEVELS[code] if code < ERROR else None

    def failed(self, row: int) -> list[str]:
        """The criteria sample ``row`` failed, sorted."""
        return sorted(cid for cid, codes in self.criteria.items() if codes[row] == FAILED)


def from_records(records: Sequence[ItemRecord], criteria: Sequence[str]) -> Outcomes:
    """Columns for per-item records (as ``results.items_bytes`` writes them)."""
    index: dict[str, int] = {}
    content: list[str] = []
    clusters: list[str] = []
    tags: list[tuple[str, ...]] = []
    n = len(records)
    item = np.empty(n, dtype=np.int64)
    level = np.empty(n, dtype=np.int8)
    latency = np.zeros(n, dtype=np.int64)
    timed = np.ones(n, dtype=bool)
    cost = np.zeros(n, dtype=np.int64)
    verdicts = {cid: np.full(n, ABSENT, dtype=np.int8) for cid in criteria}
    keys: list[str | None] = [r.get("key") for r in records]
    for row, r in enumerate(records):
        item_id = r["item"]
        at = index.get(item_id)
        if at is None:
            at = index[item_id] = len(content)
            content.append(r["content"])
            clusters.append(r.get("cluster") or item_id)
            tags.append(tuple(r["tags"]))
        else:
            content[at] = r["content"]
            tags[at] = tuple(r["tags"])
        item[row] = at
        if r["error"] is not None:
            level[row] = ERROR
            continue
        clusters[at] = r.get("cluster") or item_id
        level[row] = _LEVEL_CODE.get(r["level"] or "", _UNLEVELLED)
        latency[row] = int(r["latency_ms"])
        timed[row] = not r.get("batch")
        cost[row] = int(r["cost_micro_usd"])
        for cid, verdict in r["criteria"].items():
            codes = verdicts.get(cid)
            if codes is None:
                codes = verdicts[cid] = np.full(n, ABSENT, dtype=np.int8)
            codes[row] = PASSED if verdict["passed"] else FAILED
        for cid in r.get(UNGRADED_FIELD, ()):
            codes = verdicts.get(cid)
            if codes is None:
                codes = verdicts[cid] = np.full(n, ABSENT, dtype=np.int8)
            codes[row] = UNGRADED

    def usage(_name: str, graded: Mask) -> Usage:
        latencies = latency[graded & timed].tolist()
        return Usage(
            int(np.count_nonzero(graded)),
            percentile(latencies, 50),
            percentile(latencies, 95),
            int(cost[graded].sum()),
            len(latencies),
        )

    return Outcomes(
        Items(list(index), clusters, tags),
        item,
        level,
        verdicts,
        content=lambda: content,
        usage=usage,
        key=keys.__getitem__,
    )


def _codes(column: str, table: npt.NDArray[np.int8]) -> Codes:
    codes: Codes = table[np.frombuffer(column.encode("ascii"), dtype=np.uint8)]
    return codes


def from_summary(
    summary: CellSummary,
    evalset: EvalSet,
    criteria: Sequence[str],
    items_file: Callable[[], bytes],
) -> Outcomes | None:
    """Columns from a cell summary's ``samples``, given the eval set it was graded on (its
    items and md5); None when the summary has no usable ``samples`` (an older
    schema, another eval set, or columns that do not fit it), so the caller reads the
    records instead. ``items_file`` reads the per-item records, should a sample's store
    key be asked for (only that sample's line is parsed)."""
    samples = summary.get("samples")
    items, md5 = evalset.items, evalset.md5
    if (
        not isinstance(samples, dict)
        or (summary.get("evalset") or {}).get("md5") != md5
        or not isinstance(samples.get("levels"), str)
        or not isinstance(samples.get("criteria"), dict)
        or not items
    ):
        return None
    levels: str = samples["levels"]
    columns: dict[str, str] = samples["criteria"]
    totals = summary.get("totals")
    repeats, remainder = divmod(len(levels), len(items))
    if (
        remainder
        or totals is None
        or totals.get("items") != len(items)
        or totals.get("samples") != len(levels)
        or not repeats
        or not levels.isascii()
        or any(
            not isinstance(c, str) or len(c) != len(levels) or not c.isascii()
            for c in columns.values()
        )
        or any(cid not in columns for cid in criteria)
    ):
        return None
    known = _evalset_items(evalset)
    slices: dict[str, SliceAggregate] = {ALL: totals, **(summary.get("slices") or {})}

    def usage(name: str, _graded: Mask) -> Usage:
        aggregate = slices[name]
        return Usage(
            int(aggregate["graded"]),
            int(aggregate["latency_ms"]["p50"]),
            int(aggregate["latency_ms"]["p95"]),
            int(aggregate["cost_micro_usd"]),
            int(aggregate["graded"]) - int(aggregate.get("batched", 0)),
        )

    def content() -> list[str]:

        return [item_content(item) for item in evalset.by_id]

    lines: list[bytes] = []

    def key(row: int) -> str | None:
        if not lines:
            lines.extend(items_file().splitlines())
        if row >= len(lines):
            return None
        record = load_json(lines[row])
        # The line is the sample's when the file is the one the summary describes.
        if not isinstance(record, dict) or record.get("item") != known.ids[row // repeats]:
            return None
        found = record.get("key")
        return found if isinstance(found, str) else None

    return Outcomes(
        known,
        np.repeat(np.arange(len(known.ids), dtype=np.int64), repeats),
        _codes(levels, _LEVEL_TABLE),
        {cid: _codes(columns[cid], _VERDICT_TABLE) for cid in criteria},
        content=content,
        source=md5,
        usage=usage,
        key=key,
    )
