"""Metrics from columns (``outcomes.Outcomes``) equal the record-by-record definitions.

``tests/support/reference_metrics.py`` computes every metric and comparison straight from
the per-item records, one record at a time, in the most literal way; the columnar code in
``evalreg.metrics`` must give the same floats, bit for bit, on random cells with repeats,
clusters, errors, missing verdicts and changed items.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from evalreg import metrics
from evalreg.registry import schema
from evalreg.results.outcomes import from_records
from evalreg.selection.calibration import add_agreement

from support import reference_metrics as reference

CRITERIA = ("format", "facts", "tone")
TAGS = ("common", "edge", "messy", "long")


def _task(volume: int | None = 1000) -> Any:
    return schema.Task.model_validate(
        {
            "schema_version": 1,
            "description": "t",
            "evalset": "evalsets/x.jsonl",
            "prompt": {"template": "{{ text }}"},
            "rubric": "r",
            "monthly_volume": volume,
            "failure_modes": [
                {"id": "bad", "description": "d", "cost_usd": 2.5, "detected_by": ["facts"]},
                {
                    "id": "worse",
                    "description": "d",
                    "cost_usd": 0.75,
                    "detected_by": ["format", "tone"],
                },
            ],
        }
    )


def _rubric() -> Any:
    return schema.Rubric.model_validate(
        {
            "schema_version": 1,
            "description": "r",
            "version": "1",
            "criteria": [
                {"id": c, "description": c, "grader": {"type": "exact", "field": "x"}}
                for c in CRITERIA
            ],
            "levels": {"correct": {"require": "all"}},
        }
    )


def _records(
    rng: random.Random, n_items: int, repeats: int, clustered: bool, offset: int = 0
) -> list[dict[str, Any]]:
    out = []
    for i in range(n_items):
        item = f"i-{i + offset:04d}"
        tags = sorted(rng.sample(TAGS, rng.randint(0, 2)))
        cluster = f"c{i % 7}" if clustered and rng.random() < 0.8 else None
        for sample in range(repeats):
            record: dict[str, Any] = {
                "item": item,
                "content": f"h{i}",
                "sample": sample,
                "tags": tags,
                "cluster": cluster,
                "key": f"k-{item}-{sample}",
            }
            if rng.random() < 0.08:
                record.update(error="timeout", criteria={}, level=None, latency_ms=0)
                record.update(cost_micro_usd=0, score=0.0)
            else:
                record.update(
                    error=None,
                    criteria={
                        c: {"passed": rng.random() < 0.7, "score": 1.0, "detail": ""}
                        for c in CRITERIA
                        if rng.random() < 0.85
                    },
                    level=rng.choice(("correct", "correct", "acceptable", "unacceptable")),
                    latency_ms=rng.randint(50, 3000),
                    cost_micro_usd=rng.randint(0, 900),
                    score=0.5,
                )
            record["tokens"] = {"input": 1, "output": 1, "reasoning": 0}
            out.append(record)
    return out


CASES = [(n, r, c) for n in (0, 1, 2, 9, 60, 400) for r in (1, 3) for c in (False, True)]


@pytest.mark.parametrize(("n_items", "repeats", "clustered"), CASES)
@pytest.mark.parametrize("pass_level", ["correct", "acceptable"])
def test_cell_metrics_match_the_record_definitions(
    n_items: int, repeats: int, clustered: bool, pass_level: str
) -> None:
    rng = random.Random(n_items * 10 + repeats + clustered)
    records = _records(rng, n_items, repeats, clustered)
    task, rubric = _task(), _rubric()
    expected = reference.cell_metrics(records, task, rubric, pass_level, 0.95)
    got = metrics.cell_metrics(from_records(records, CRITERIA), task, rubric, pass_level, 0.95)
    assert got == expected


@pytest.mark.parametrize(("n_items", "repeats", "clustered"), CASES)
def test_comparisons_match_the_record_definitions(
    n_items: int, repeats: int, clustered: bool
) -> None:
    rng = random.Random(n_items * 7 + repeats + clustered)
    base = _records(rng, n_items, repeats, clustered)
    other = _records(rng, n_items, repeats, clustered)
    # Some items changed content, some are only on one side.
    for r in other:
        if r["item"].endswith("3"):
            r["content"] = "changed"
    other = [r for r in other if not r["item"].endswith("5")]
    other += _records(rng, 4, repeats, clustered, offset=n_items)
    for a, b in ((base, other), (base, base), (other, base)):
        expected = reference.compare(a, b, "correct", 0.95)
        got = metrics.compare(from_records(a, CRITERIA), from_records(b, CRITERIA), "correct")
        assert got == expected


def test_passing_items_is_a_mean_of_at_least_one_half() -> None:
    rng = random.Random(5)
    records = _records(rng, 200, 3, False)
    ok = metrics.pass_levels("acceptable")
    ids, scores, _ = reference.item_scores(records, lambda r: r["level"] in ok)
    outcomes = from_records(records, CRITERIA)
    has, passes = metrics.passing(outcomes, "acceptable")
    got = {outcomes.ids[i]: bool(passes[i]) for i in range(len(outcomes.ids)) if has[i]}
    assert got == {i: s >= 0.5 for i, s in zip(ids, scores, strict=True)}


def test_judge_human_agreement_reads_the_columns() -> None:
    rubric = schema.Rubric.model_validate(
        {
            "schema_version": 1,
            "description": "r",
            "version": "1",
            "criteria": [
                {
                    "id": "judge",
                    "description": "j",
                    "grader": {"type": "exact", "field": "x"},
                },
                {
                    "id": "human",
                    "description": "h",
                    "grader": {"type": "human", "file": "grades.csv", "calibrates": "judge"},
                },
            ],
            "levels": {"correct": {"require": "all"}},
        }
    )
    rng = random.Random(3)
    records = []
    for i in range(80):
        verdicts = {
            c: {"passed": rng.random() < 0.6, "score": 1.0, "detail": ""}
            for c in ("judge", "human")
            if rng.random() < 0.9
        }
        records.append(
            {
                "item": f"i{i:03d}",
                "content": "c",
                "sample": 0,
                "tags": ["edge"] if i % 3 else [],
                "cluster": None,
                "key": None,
                "error": None,
                "criteria": verdicts,
                "level": "correct",
                "latency_ms": 1,
                "cost_micro_usd": 0,
            }
        )
    outcomes = from_records(records, ["judge", "human"])
    got: dict[str, Any] = {"all": {}, "edge": {}}
    add_agreement(got, outcomes, rubric)
    both = [
        (r["criteria"]["judge"]["passed"], r["criteria"]["human"]["passed"])
        for r in records
        if "judge" in r["criteria"] and "human" in r["criteria"]
    ]
    from evalreg.graders.human import alpha

    assert got["all"]["judge_human_agreement"].value == alpha([list(p) for p in both])
    assert got["all"]["judge_human_agreement"].n == len(both)
    assert 0 < got["edge"]["judge_human_agreement"].n < len(both)


@pytest.mark.parametrize(("n_items", "repeats", "clustered"), [c for c in CASES if c[0]])
def test_summary_samples_give_the_same_metrics_as_the_records(
    n_items: int, repeats: int, clustered: bool
) -> None:
    """A summary's ``samples`` plus its eval set stand in for the per-item records."""
    from evalreg.evalsets.evalset import EvalSet
    from evalreg.results.outcomes import from_summary
    from evalreg.results.tally import CellTally
    from evalreg.runner.grading import item_content

    rng = random.Random(n_items + repeats)
    records = _records(rng, n_items, repeats, clustered)
    items = {}
    for r in records:
        items[r["item"]] = schema.Item.validate(
            {
                "id": r["item"],
                "input": {"text": r["item"]},
                "tags": r["tags"],
                "cluster": r["cluster"],
            }
        )
    for r in records:
        r["content"] = item_content(items[r["item"]])
    rng.shuffle(records)
    tally = CellTally(CRITERIA)
    for r in sorted(records, key=lambda r: (r["item"], r["sample"])):
        tally.add(r)  # type: ignore[arg-type]
    summary: Any = {
        "evalset": {"md5": "m1"},
        "totals": tally.totals(),
        "slices": tally.slices(),
        "samples": tally.columns(),
    }
    shuffled = list(items.values())
    rng.shuffle(shuffled)
    columns = from_summary(summary, EvalSet("e.jsonl", "m1", tuple(shuffled)), CRITERIA, bytes)
    assert columns is not None
    task, rubric = _task(), _rubric()
    for level in ("correct", "acceptable"):
        expected = reference.cell_metrics(records, task, rubric, level, 0.95)
        assert metrics.cell_metrics(columns, task, rubric, level) == expected
    other = _records(rng, n_items, repeats, clustered)
    for r in other:
        r["content"] = item_content(items[r["item"]])
    got = metrics.compare(columns, from_records(other, CRITERIA), "correct")
    assert got == reference.compare(records, other, "correct", 0.95)
    # Another eval set, or columns that do not fit it: the records must be read instead.
    assert from_summary(summary, EvalSet("e.jsonl", "m2", tuple(shuffled)), CRITERIA, bytes) is None
    fewer = EvalSet("e.jsonl", "m1", tuple(shuffled[1:]))
    assert from_summary(summary, fewer, CRITERIA, bytes) is None
    unsampled = {**summary, "samples": None}
    assert (
        from_summary(unsampled, EvalSet("e.jsonl", "m1", tuple(shuffled)), CRITERIA, bytes) is None
    )


def _sample(item: str, sample: int, error: bool, cluster: str | None = None) -> dict[str, Any]:
    record: dict[str, Any] = {
        "item": item,
        "content": f"h-{item}",
        "sample": sample,
        "tags": [],
        "cluster": cluster,
        "key": f"k-{item}-{sample}",
        "tokens": {"input": 1, "output": 1, "reasoning": 0},
    }
    if error:
        record.update(error="timeout", criteria={}, level=None, latency_ms=0)
        record.update(cost_micro_usd=0, score=0.0)
    else:
        record.update(error=None, criteria={}, level="correct", latency_ms=100)
        record.update(cost_micro_usd=1, score=1.0)
    return record


def test_error_rate_is_a_rate_over_items_not_samples() -> None:
    # 10 errors in 100 samples, all from 2 of 20 items: two items in twenty erred, which
    # is Wilson's 2/20, not 10/100 treated as 100 independent samples ([0.055, 0.174]).
    records = [_sample(f"i-{i:02d}", s, error=i < 2) for i in range(20) for s in range(5)]
    got = metrics.cell_metrics(from_records(records, CRITERIA), _task(), _rubric())
    rate = got["all"]["error_rate"]
    assert rate.value == pytest.approx(0.1)
    assert rate.n == 20
    assert (rate.lo, rate.hi) == pytest.approx((0.027866, 0.301034), abs=1e-6)


def test_error_rate_is_clustered_like_the_pass_rate() -> None:
    # Both erring items share a cluster: the interval widens as the pass rate's would.
    records = [
        _sample(f"i-{i:02d}", s, error=i < 2, cluster="c0" if i < 4 else None)
        for i in range(20)
        for s in range(5)
    ]
    got = metrics.cell_metrics(from_records(records, CRITERIA), _task(), _rubric())
    rate = got["all"]["error_rate"]
    assert rate.value == pytest.approx(0.1)
    assert rate.hi > 0.301034


def test_an_item_tagged_all_leaves_every_item_in_slice_all() -> None:
    """Slice ``all`` is every item, as the summary's totals count them, whichever items
    also carry a tag named ``all``."""
    from evalreg.results.outcomes import Items

    items = Items(["a", "b", "c"], ["a", "b", "c"], [("all",), (), ("all", "x")])
    slices = {name: mask.tolist() for name, mask in items.slices().items()}
    assert slices == {"all": [True, True, True], "x": [False, False, True]}
