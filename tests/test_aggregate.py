"""A cell's summary, the one implementation (``results.tally``), against a brute-force
computation; the files written while grading are the bytes of all records at once."""

from __future__ import annotations

import hashlib
import io
import itertools
import math
import random
from typing import Any, cast

import pytest

from evalreg.registry.loader import load_registry
from evalreg.results.freshness import status
from evalreg.results.records import ItemRecord, items_bytes, rounded, summary_bytes
from evalreg.results.tally import CellTally, summary_for
from evalreg.runner._cellwriter import CellWriter

from conftest import Repo


def tmp_name(rel: str) -> str:
    return f"{rel}.test.tmp"


TAGS = ["edge", "common", "long", "all"]


def records(n_items: int, seed: int = 7) -> list[ItemRecord]:
    """Varied records in (item, sample) order: errors, repeats, odd tags (``all`` among
    them), equal latencies, judge costs, criteria not graded."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for i in range(n_items):
        tags = sorted(rng.sample(TAGS, rng.randint(0, 2)) + (["edge"] if i % 11 == 0 else []))
        for sample in range(rng.randint(1, 3)):
            base = {
                "item": f"i-{i:04d}",
                "content": f"{i:016x}",
                "sample": sample,
                "tags": tags,
                "cluster": None if i % 4 else f"c{i % 3}",
                "key": f"{i * 31 + sample:064x}",
            }
            judge = {"judge_cost_micro_usd": rng.randint(0, 30)} if i % 5 == 1 else {}
            if rng.random() < 0.1:
                out.append(
                    {
                        **base,
                        "error": "offline_miss" if not judge else "judge: timed out",
                        "criteria": {},
                        "level": None,
                        "score": 0.0,
                        "latency_ms": 0,
                        "tokens": {"input": 0, "output": 0, "reasoning": 0},
                        "cost_micro_usd": rng.randint(0, 9) if judge else 0,
                        **judge,
                    }
                )
                continue
            criteria = {
                cid: {"passed": rng.random() < 0.7, "score": rounded(rng.random()), "detail": "d"}
                for cid in ("echo", "valid_json", "short")
                if rng.random() < 0.8
            }
            ungraded = {"ungraded": ["human"]} if "echo" not in criteria else {}
            out.append(
                {
                    **base,
                    **ungraded,
                    **judge,
                    "error": None,
                    "criteria": criteria,
                    "level": rng.choice(["correct", "acceptable", "unacceptable"]),
                    "score": rounded(rng.random() / 3),
                    "latency_ms": rng.choice([120, 300, 301, 999, rng.randint(0, 5000)]),
                    "tokens": {"input": rng.randint(0, 99), "output": 5, "reasoning": 0},
                    "cost_micro_usd": rng.randint(0, 50),
                }
            )
    return cast(list[ItemRecord], out)


def nearest_rank(values: list[int], p: float) -> int:
    """The smallest value with at least ``p`` percent of the values at or below it."""
    ordered = sorted(values)
    for value in ordered:
        if sum(v <= value for v in ordered) * 100 >= p * len(ordered):
            return value
    return 0


def brute_aggregate(rs: list[ItemRecord]) -> dict[str, Any]:
    """A slice's aggregate straight from its records, by the documented definitions."""
    graded = [r for r in rs if r["error"] is None]
    names = sorted({cid for r in graded for cid in [*r["criteria"], *r.get("ungraded", [])]})
    criteria = {}
    for cid in names:
        verdicts = [r["criteria"][cid] for r in graded if cid in r["criteria"]]
        entry = {"applicable": len(verdicts), "passed": sum(v["passed"] for v in verdicts)}
        ungraded = sum(cid in r.get("ungraded", []) for r in graded)
        if ungraded:
            entry["ungraded"] = ungraded
        criteria[cid] = entry
    latencies = [r["latency_ms"] for r in graded]
    out = {
        "samples": len(rs),
        "items": len({r["item"] for r in rs}),
        "graded": len(graded),
        "errors": len(rs) - len(graded),
        "levels": {
            level: sum(r["level"] == level for r in graded)
            for level in ("correct", "acceptable", "unacceptable")
        },
        "criteria": criteria,
        "score_sum": round(math.fsum(r["score"] for r in graded), 6),
        "latency_ms": {"p50": nearest_rank(latencies, 50), "p95": nearest_rank(latencies, 95)},
        "tokens": {
            kind: sum(r["tokens"][kind] for r in graded)  # type: ignore[literal-required]
            for kind in ("input", "output", "reasoning")
        },
        "cost_micro_usd": sum(r["cost_micro_usd"] for r in graded),
    }
    judged = [r["judge_cost_micro_usd"] for r in rs if "judge_cost_micro_usd" in r]
    if judged:
        out["judge_cost_micro_usd"] = sum(judged)
        out["spend_micro_usd"] = sum(r["cost_micro_usd"] for r in rs) + sum(judged)
    return out


def brute_summary(rs: list[ItemRecord], criteria: list[str]) -> dict[str, Any]:
    """The results part of a summary: totals over every record (each once), one slice per
    tag other than ``all``, and every sample's level and verdicts in items-file order."""
    ordered = sorted(rs, key=lambda r: (r["item"], r["sample"]))
    tags = sorted({t for r in rs for t in r["tags"]} - {"all"})
    levels = {"correct": "c", "acceptable": "a", "unacceptable": "u"}

    def verdict(r: ItemRecord, cid: str) -> str:
        if cid in r["criteria"]:
            return "1" if r["criteria"][cid]["passed"] else "0"
        return "-" if cid in r.get("ungraded", []) else "."

    return {
        "totals": brute_aggregate(rs),
        "slices": {t: brute_aggregate([r for r in rs if t in r["tags"]]) for t in tags},
        "samples": {
            "levels": "".join(
                "e" if r["error"] is not None else levels.get(r["level"] or "", "?")
                for r in ordered
            ),
            "criteria": {
                cid: "".join(verdict(r, cid) for r in ordered) for cid in sorted(criteria)
            },
        },
    }


def results_of(summary: Any) -> dict[str, Any]:
    return {k: summary[k] for k in ("totals", "slices", "samples")}


@pytest.mark.parametrize("n_items", [0, 1, 250])
def test_a_cell_written_while_grading_has_the_bytes_of_all_records_at_once(
    repo: Repo, n_items: int
) -> None:
    registry = load_registry(repo.root)
    st = status(registry)[0]
    evalset = registry.evalset_of(st.cell.task_id)
    rs = records(n_items)
    with CellWriter(repo.root, st.cell, tmp_name) as writer:
        for r in rs:
            writer.add(r)
        summary = writer.finish(st, evalset)
    assert writer.staged is not None
    for staged in writer.staged:
        (repo.root / staged.tmp).replace(repo.root / staged.path)
    items = items_bytes(rs)
    criteria = [c.id for c in st.cell.rubric.criteria]
    assert results_of(summary) == brute_summary(rs, criteria)
    assert summary["cell"] == {
        "task": st.cell.task_id,
        "candidate": st.cell.candidate.id,
        "pin": st.cell.candidate.pin,
    }
    assert (summary["fingerprint"], summary["fingerprint_parts"]) == (st.fingerprint, st.parts)
    assert summary["evalset"] == {"path": evalset.path, "md5": evalset.md5}
    md5 = hashlib.md5(items, usedforsecurity=False).hexdigest()
    assert summary["items_file"] == {"path": st.cell.items_path, "md5": md5}
    assert (repo.root / st.cell.items_path).read_bytes() == items
    assert (repo.root / st.cell.summary_path).read_bytes() == summary_bytes(summary)
    # Records in any order (reproduce's) give the same summary.
    shuffled = random.Random(n_items).sample(rs, len(rs))
    again = summary_for(
        st.cell, st.fingerprint, st.parts, evalset.path, evalset.md5, shuffled, items
    )
    assert again == summary


def test_an_item_tagged_all_counts_once_in_the_totals(repo: Repo) -> None:
    """The totals are the ``all`` slice: an item tagged ``all`` is counted once, like any
    other, and ``all`` is not a slice of its own."""
    registry = load_registry(repo.root)
    st = status(registry)[0]
    evalset = registry.evalset_of(st.cell.task_id)
    rs = [r for r in records(40) if r["error"] is None][:6]
    for i, r in enumerate(rs):
        r["item"], r["sample"] = f"i-{i}", 0
        r["tags"] = ["all", "edge"] if i < 2 else ["edge"] if i < 4 else []
        r.pop("judge_cost_micro_usd", None)
        r.pop("ungraded", None)
    items = items_bytes(rs)
    summary = summary_for(st.cell, st.fingerprint, st.parts, evalset.path, evalset.md5, rs, items)
    totals = summary["totals"]
    assert (totals["samples"], totals["items"], totals["graded"]) == (6, 6, 6)
    assert sum(totals["levels"].values()) == 6
    assert totals["cost_micro_usd"] == sum(r["cost_micro_usd"] for r in rs)
    assert totals["tokens"]["input"] == sum(r["tokens"]["input"] for r in rs)
    assert totals["score_sum"] == round(math.fsum(r["score"] for r in rs), 6)
    assert sorted(summary["slices"]) == ["edge"]
    assert summary["slices"]["edge"]["samples"] == 4
    assert len(summary["samples"]["levels"]) == 6  # type: ignore[typeddict-item]


def test_a_tally_refuses_records_out_of_item_order() -> None:
    first, second = records(2)[0], records(2)[-1]
    tally = CellTally()
    tally.add(second)
    with pytest.raises(ValueError, match="out of"):
        tally.add(first)


def test_grading_that_fails_midway_leaves_the_previous_results(repo: Repo) -> None:
    registry = load_registry(repo.root)
    st = status(registry)[0]
    items_path = repo.root / st.cell.items_path
    items_path.parent.mkdir(parents=True)
    items_path.write_bytes(b"previous\n")
    with pytest.raises(RuntimeError), CellWriter(repo.root, st.cell, tmp_name) as writer:
        writer.add(records(1)[0])
        raise RuntimeError("a grader crashed")
    assert items_path.read_bytes() == b"previous\n"
    assert list(items_path.parent.iterdir()) == [items_path]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_tallies_merged_in_order_equal_one_tally_of_all(repo: Repo, seed: int) -> None:
    """Records split anywhere (between items or between one item's samples), tallied apart
    and added to a writer in order, give the bytes of adding them one by one."""
    registry = load_registry(repo.root)
    st = status(registry)[0]
    evalset = registry.evalset_of(st.cell.task_id)
    rs = records(120, seed)
    cuts = sorted(random.Random(seed).sample(range(1, len(rs)), 4))
    criteria = [c.id for c in st.cell.rubric.criteria]
    with CellWriter(repo.root, st.cell, tmp_name) as writer:
        for start, end in zip([0, *cuts], [*cuts, len(rs)], strict=True):
            part = rs[start:end]
            if start % 2:  # some parts come graded elsewhere, some one by one
                tally = CellTally(criteria)
                for r in part:
                    tally.add(r)
                writer.add_graded(io.BytesIO(items_bytes(part)), tally)
            else:
                for r in part:
                    writer.add(r)
        writer.add_graded(io.BytesIO(), CellTally(criteria))  # an empty part changes nothing
        summary = writer.finish(st, evalset)
    assert writer.staged is not None
    for staged in writer.staged:
        (repo.root / staged.tmp).replace(repo.root / staged.path)
    items = items_bytes(rs)
    assert results_of(summary) == brute_summary(rs, criteria)
    md5 = hashlib.md5(items, usedforsecurity=False).hexdigest()
    assert summary["items_file"]["md5"] == md5
    assert (repo.root / st.cell.items_path).read_bytes() == items


def test_a_merge_refuses_a_tally_that_comes_before() -> None:
    rs = records(3)
    early, late = CellTally(), CellTally()
    early.add(rs[0])
    late.add(rs[-1])
    with pytest.raises(ValueError, match="out of"):
        late.merge(early)


def test_a_merge_refuses_a_tally_of_other_criteria() -> None:
    """The verdict columns are rows of one character per criterion: tallies of different
    criteria cannot be joined."""
    rs = records(3)
    early, late = CellTally(["a", "b"]), CellTally(["a"])
    early.add(rs[0])
    late.add(rs[-1])
    with pytest.raises(ValueError, match="different criteria"):
        early.merge(late)


def test_chunks_end_at_item_boundaries_and_keep_the_order() -> None:
    from evalreg.runner._gradepool import chunks

    items = [object() for _ in range(50)]
    rng = random.Random(5)
    samples = [
        (item, s, f"{i}:{s}") for i, item in enumerate(items) for s in range(rng.randint(1, 4))
    ]
    for parts in (1, 2, 3, 7, 200):
        pieces = chunks(samples, parts)  # type: ignore[arg-type]
        assert [s for piece in pieces for s in piece] == samples
        assert len(pieces) <= parts
        for before, after in itertools.pairwise(pieces):
            assert before[-1][0] is not after[0][0]
    assert chunks([], 4) == []


def test_grade_all_keeps_one_items_samples_together(monkeypatch: pytest.MonkeyPatch) -> None:
    """Samples of a single item cannot be split: they are graded here, not by workers."""
    from evalreg import forked
    from evalreg.runner import _gradepool as gradepool

    monkeypatch.setattr(forked, "parts", lambda units, min_part=0: 4)
    item = object()
    samples = [(item, s, f"k{s}") for s in range(8)]
    got: list[ItemRecord] = []
    graded_elsewhere: list[bytes] = []
    gradepool.grade_all(
        samples,  # type: ignore[arg-type]
        lambda item, sample, key, stored: {"sample": sample, "key": key},
        lambda keys: [None] * len(keys),
        [],
        got.append,
        lambda lines, tally: graded_elsewhere.append(lines),
    )
    assert [r["sample"] for r in got] == list(range(8))
    assert graded_elsewhere == []


def test_a_view_of_samples_is_the_list_it_stands_for() -> None:
    from evalreg.runner._gradepool import Samples, chunks

    items = [object() for _ in range(7)]
    keys = [f"k{i}" for i in range(21)]
    listed = [(items[i // 3], i % 3, keys[i]) for i in range(21)]
    for start in (0, 1, 5, 20, 21):
        view = Samples(items, keys, 3, start)  # type: ignore[arg-type]
        assert list(view) == listed[start:]
        assert len(view) == 21 - start
        assert [view[i] for i in range(-len(view), len(view))] == listed[start:] * 2
        assert list(view[2:9]) == listed[start:][2:9]
        for parts in (1, 2, 4):
            assert [list(p) for p in chunks(view, parts)] == [
                list(p) for p in chunks(listed[start:], parts)
            ]
    with pytest.raises(IndexError):
        Samples(items, keys, 3, 19)[2]  # type: ignore[arg-type]
