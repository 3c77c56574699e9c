"""A cell's results written while grading are the bytes ``results`` gives for all records."""

from __future__ import annotations

import io
import itertools
import random
from typing import Any

import pytest

from evalreg.registry.loader import load_registry
from evalreg.results.freshness import status
from evalreg.results.records import items_bytes, rounded, summary_bytes, summary_for
from evalreg.results.tally import CellTally
from evalreg.runner._cellwriter import CellWriter

from conftest import Repo


def tmp_name(rel: str) -> str:
    return f"{rel}.test.tmp"


TAGS = ["edge", "common", "long", "all"]


def records(n_items: int, seed: int = 7) -> list[dict[str, Any]]:
    """Varied records in (item, sample) order: errors, repeats, odd tags, equal latencies."""
    rng = random.Random(seed)
    out = []
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
            if rng.random() < 0.1:
                out.append(
                    {
                        **base,
                        "error": "offline_miss",
                        "criteria": {},
                        "level": None,
                        "score": 0.0,
                        "latency_ms": 0,
                        "tokens": {"input": 0, "output": 0, "reasoning": 0},
                        "cost_micro_usd": 0,
                    }
                )
                continue
            criteria = {
                cid: {"passed": rng.random() < 0.7, "score": rounded(rng.random()), "detail": "d"}
                for cid in ("echo", "valid_json", "short")
                if rng.random() < 0.8
            }
            out.append(
                {
                    **base,
                    "error": None,
                    "criteria": criteria,
                    "level": rng.choice(["correct", "acceptable", "unacceptable"]),
                    "score": rounded(rng.random() / 3),
                    "latency_ms": rng.choice([120, 300, 301, 999, rng.randint(0, 5000)]),
                    "tokens": {"input": rng.randint(0, 99), "output": 5, "reasoning": 0},
                    "cost_micro_usd": rng.randint(0, 50),
                }
            )
    return out


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
    expected = summary_for(st.cell, st.fingerprint, st.parts, evalset.path, evalset.md5, rs, items)
    assert summary == expected
    assert (repo.root / st.cell.items_path).read_bytes() == items
    assert (repo.root / st.cell.summary_path).read_bytes() == summary_bytes(expected)


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
    expected = summary_for(st.cell, st.fingerprint, st.parts, evalset.path, evalset.md5, rs, items)
    assert summary == expected
    assert (repo.root / st.cell.items_path).read_bytes() == items


def test_a_merge_refuses_a_tally_that_comes_before() -> None:
    rs = records(3)
    early, late = CellTally(), CellTally()
    early.add(rs[0])
    late.add(rs[-1])
    with pytest.raises(ValueError, match="out of"):
        late.merge(early)


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
    from evalreg.runner import _forked as forked
    from evalreg.runner import _gradepool as gradepool

    monkeypatch.setattr(forked, "parts", lambda units, min_part=0: 4)
    item = object()
    samples = [(item, s, f"k{s}") for s in range(8)]
    got: list[dict[str, Any]] = []
    graded_elsewhere: list[bytes] = []
    gradepool.grade_all(
        samples,  # type: ignore[arg-type]
        lambda item, sample, key: {"sample": sample, "key": key},
        [],
        got.append,
        lambda lines, tally: graded_elsewhere.append(lines),
    )
    assert [r["sample"] for r in got] == list(range(8))
    assert graded_elsewhere == []
