"""The cell summary, computed in one place: a ``CellTally`` fed records one at a time.

Run's streaming path feeds it records as they are graded, grading workers' tallies are
merged into it, and ``summary_for`` (reproduce, tests) feeds it a list of records. It
keeps only what the aggregates need (counts, sums, a latency histogram and the scores as
8-byte floats), so grading 100,000 samples holds no per-item dicts. Records must arrive in
``(item, sample)`` order, as they are written to the items file.

A record's tags name the slices it counts in, once each; the totals are the ``all`` slice,
so an item tagged ``all`` counts in them once, as every other item does.
"""

from __future__ import annotations

import hashlib
import math
from array import array
from collections import Counter
from collections.abc import Sequence
from typing import Any

from evalreg._version import __version__
from evalreg.cells import Cell
from evalreg.results.records import (
    ALL,
    LEVELS,
    SUMMARY_SCHEMA,
    UNGRADED_FIELD,
    CellSummary,
    CriterionCounts,
    ItemRecord,
    SampleColumns,
    SliceAggregate,
    Tokens,
    add_verdict_chars,
    item_order,
    level_char,
    rounded,
)


class SliceTally:
    """The running aggregate of one slice of a cell's records."""

    def __init__(self) -> None:
        self.samples = 0
        self.items = 0
        self.first_item: str | None = None
        self.last_item: str | None = None
        self.levels = dict.fromkeys(LEVELS, 0)
        self.criteria: dict[str, list[int]] = {}
        self.latencies: Counter[int] = Counter()
        self.batched = 0
        """Graded samples bought in a batch: no latency of theirs is counted."""
        # Summed at the end with math.fsum, which is correctly rounded: the same float on
        # every Python version (the built-in sum of floats changed in 3.12), in any order.
        self.scores = array("d")
        self.tokens = Tokens(input=0, output=0, reasoning=0)
        self.cost = 0
        self.judge_cost: int | None = None
        self.spend = 0

    def add(self, r: ItemRecord) -> None:
        self.samples += 1
        cost = r["cost_micro_usd"]
        judge = r.get("judge_cost_micro_usd")
        if judge is None:
            self.spend += cost
        else:
            self.judge_cost = (self.judge_cost or 0) + judge
            self.spend += cost + judge
        # Records arrive grouped by item, so counting changes of item counts distinct items.
        item = r["item"]
        if item != self.last_item:
            self.items += 1
            self.last_item = item
            if self.first_item is None:
                self.first_item = item
        if r["error"] is not None:
            return
        level = r["level"]
        if level in self.levels:
            self.levels[level] += 1
        criteria = self.criteria
        for cid, verdict in r["criteria"].items():
            counts = criteria.get(cid)
            if counts is None:
                counts = criteria[cid] = [0, 0, 0]
            counts[0] += 1
            if verdict["passed"]:
                counts[1] += 1
        for cid in r.get(UNGRADED_FIELD, ()):
            criteria.setdefault(cid, [0, 0, 0])[2] += 1
        if r.get("batch"):
            self.batched += 1
        else:
            self.latencies[r["latency_ms"]] += 1
        self.scores.append(r["score"])
        tokens, used = self.tokens, r["tokens"]  # not _add_tokens: a call a record costs
        tokens["input"] += used["input"]
        tokens["output"] += used["output"]
        tokens["reasoning"] += used["reasoning"]
        self.cost += cost

    def _add_tokens(self, used: Tokens) -> None:
        tokens = self.tokens
        tokens["input"] += used["input"]
        tokens["output"] += used["output"]
        tokens["reasoning"] += used["reasoning"]

    def merge(self, other: SliceTally) -> None:
        """Add ``other``, the tally of the records that follow this one's."""
        if not other.samples:
            return
        self.samples += other.samples
        # An item whose samples straddle the two is one item, not two.
        self.items += other.items - (other.first_item == self.last_item)
        if self.first_item is None:
            self.first_item = other.first_item
        self.last_item = other.last_item
        for level, n in other.levels.items():
            self.levels[level] += n
        for cid, theirs in other.criteria.items():
            counts = self.criteria.setdefault(cid, [0, 0, 0])
            for i, n in enumerate(theirs):
                counts[i] += n
        self.latencies.update(other.latencies)
        self.batched += other.batched
        self.scores.extend(other.scores)  # fsum is exact: the split does not matter
        self._add_tokens(other.tokens)
        self.cost += other.cost
        if other.judge_cost is not None:
            self.judge_cost = (self.judge_cost or 0) + other.judge_cost
        self.spend += other.spend

    def result(self) -> SliceAggregate:
        """The slice's aggregate. Per criterion: ``applicable`` counts its verdicts,
        ``passed`` those that passed, and ``ungraded`` (only when non-zero) the samples it
        applies to without a verdict."""
        graded = len(self.scores)
        out: SliceAggregate = {
            "samples": self.samples,
            "items": self.items,
            "graded": graded,
            "errors": self.samples - graded,
            "levels": dict(self.levels),
            "criteria": {
                cid: criterion_entry(counts) for cid, counts in sorted(self.criteria.items())
            },
            "score_sum": rounded(math.fsum(self.scores)),
            "latency_ms": {"p50": self._percentile(50), "p95": self._percentile(95)},
            "tokens": self.tokens.copy(),
            "cost_micro_usd": self.cost,
        }
        if self.judge_cost is not None:
            # Only for a slice a judge graded: a cell without a judge keeps the fields it
            # always had.
            out["judge_cost_micro_usd"] = self.judge_cost
            out["spend_micro_usd"] = self.spend
        if self.batched:
            out["batched"] = self.batched  # only then: summaries of live runs keep their bytes
        return out

    def _percentile(self, p: float) -> int:
        """``records.percentile`` (nearest rank) read from the histogram."""
        total = sum(self.latencies.values())
        if not total:
            return 0
        rank = max(1, math.ceil(p / 100 * total))
        seen = 0
        for value in sorted(self.latencies):
            seen += self.latencies[value]
            if seen >= rank:
                return value
        raise AssertionError("unreachable: the ranks add up to the total")


def criterion_entry(counts: Sequence[int]) -> CriterionCounts:
    """A criterion's entry in a slice's aggregate, from its verdicts, passes and ungraded
    samples (``ungraded`` is written only when non-zero, so rubrics graded in full keep
    their bytes)."""
    applicable, passed, ungraded = counts
    entry = CriterionCounts(applicable=applicable, passed=passed)
    if ungraded:
        entry["ungraded"] = ungraded
    return entry


class CellTally:
    """Totals and per-tag slices of one cell, fed one record at a time."""

    def __init__(self, criteria: Sequence[str] = ()) -> None:
        self.groups: dict[tuple[str, ...], SliceTally] = {}
        """One tally per set of slice tags (sorted, ``all`` left out): a record is added to
        its group's alone, and the totals and each slice are the merge of their groups."""
        self._group_of: dict[tuple[str, ...], SliceTally] = {}
        """The group of a record's tags as written."""
        self.first: tuple[str, int] | None = None
        self.last: tuple[str, int] | None = None
        self.criteria = sorted(set(criteria))
        # A byte a sample for its level and for each criterion's verdict (the characters of
        # ``columns``): a million samples hold a few megabytes, not a list entry each.
        self.levels = bytearray()
        self.verdicts = bytearray()
        """A row a sample of one verdict character per criterion (in id order): a record's
        row is added in one step, and ``columns`` reads each criterion's every n-th."""

    def add(self, record: ItemRecord) -> None:
        order = item_order(record)
        if self.last is None:
            self.first = order
        elif order < self.last:
            raise ValueError(f"records out of (item, sample) order: {order} after {self.last}")
        self.last = order
        self.levels.append(ord(level_char(record)))
        add_verdict_chars(self.verdicts, record, self.criteria)
        # Each slice counts a record once, as metrics' slices do: an item tagged twice with
        # the same tag is in it once, and one tagged ``all`` is in the totals once.
        tags = tuple(record["tags"])
        group = self._group_of.get(tags)
        if group is None:
            key = tuple(sorted(set(tags) - {ALL}))
            group = self._group_of[tags] = self.groups.setdefault(key, SliceTally())
        group.add(record)

    def merge(self, other: CellTally) -> None:
        """Add ``other``, the tally of the records that follow this one's in order: the
        result is the tally of all of them, as if they had been added one by one."""
        if other.first is None:
            return
        if self.last is not None and other.first < self.last:
            raise ValueError(
                f"records out of (item, sample) order: {other.first} after {self.last}"
            )
        if other.criteria != self.criteria:
            raise ValueError(f"tallies of different criteria: {other.criteria} and {self.criteria}")
        if self.first is None:
            self.first = other.first
        self.last = other.last
        self.levels += other.levels
        self.verdicts += other.verdicts
        for key, tally in other.groups.items():
            self.groups.setdefault(key, SliceTally()).merge(tally)

    def summary(
        self,
        cell: Cell,
        fingerprint: str,
        parts: dict[str, Any],
        evalset_path: str,
        evalset_md5: str,
        items_md5: str,
    ) -> CellSummary:
        """The cell's summary (``items_md5`` is the md5 of the records' items file)."""
        return {
            "schema_version": SUMMARY_SCHEMA,
            "cell": {
                "task": cell.task_id,
                "candidate": cell.candidate.id,
                "pin": cell.candidate.pin,
            },
            "fingerprint": fingerprint,
            "fingerprint_parts": parts,
            "evalreg_version": __version__,
            "evalset": {"path": evalset_path, "md5": evalset_md5},
            "items_file": {"path": cell.items_path, "md5": items_md5},
            "totals": self.totals(),
            "slices": self.slices(),
            "samples": self.columns(),
        }

    def totals(self) -> SliceAggregate:
        """The summary's ``totals``: every record's."""
        return self._merged(None).result()

    def slices(self) -> dict[str, SliceAggregate]:
        """The summary's ``slices``: one per tag, in tag order."""
        tags = sorted({tag for key in self.groups for tag in key})
        return {tag: self._merged(tag).result() for tag in tags}

    def _merged(self, tag: str | None) -> SliceTally:
        """The tally of the slice ``tag`` (None: the totals) from the groups in it: merging
        is exact and no item is in two groups, so it is the tally of its records added one
        by one."""
        out = SliceTally()
        for key, tally in sorted(self.groups.items()):
            if tag is None or tag in key:
                out.merge(tally)
        return out

    def columns(self) -> SampleColumns:
        """Every sample's level and verdicts, one character each, in items-file order."""
        return {
            "levels": self.levels.decode("ascii"),
            "criteria": {
                cid: self.verdicts[i :: len(self.criteria)].decode("ascii")
                for i, cid in enumerate(self.criteria)
            },
        }


def summary_for(
    cell: Cell,
    fingerprint: str,
    parts: dict[str, Any],
    evalset_path: str,
    evalset_md5: str,
    records: Sequence[ItemRecord],
    items_data: bytes,
) -> CellSummary:
    """The summary of ``records`` (in any order), whose items file is ``items_data``."""
    tally = CellTally([c.id for c in cell.rubric.criteria])
    for r in sorted(records, key=item_order):
        tally.add(r)
    items_md5 = hashlib.md5(items_data, usedforsecurity=False).hexdigest()
    return tally.summary(cell, fingerprint, parts, evalset_path, evalset_md5, items_md5)
