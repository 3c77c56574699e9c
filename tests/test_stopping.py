"""When a use case is decided on part of its items (``selection.stopping``): the policy turned
into gates and comparisons, the settling rule, the rounds, and their replay. Pure: records in,
states out; against the policy's own decision on the full records."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from evalreg import stats
from evalreg.metrics import cell_metrics
from evalreg.registry import schema
from evalreg.results.outcomes import from_records
from evalreg.results.records import ItemRecord
from evalreg.selection import stopping
from evalreg.selection.policy import decide as policy_decide
from evalreg.sequential import purchase_order

RUBRIC = schema.Rubric.model_validate(
    {
        "schema_version": 1,
        "description": "d",
        "version": "1",
        "criteria": [
            {
                "id": "label",
                "description": "d",
                "critical": True,
                "grader": {"type": "field_exact", "field": "label"},
            }
        ],
        "levels": {"correct": {"require": "all"}, "acceptable": {"require": ["label"]}},
    }
)


def selection(
    candidates: list[str], gates: list[dict[str, Any]], **policy: Any
) -> schema.Selection:
    return schema.Selection.model_validate(
        {
            "schema_version": 1,
            "use_case": "u",
            "task": "t",
            "candidates": [{"id": c, "pin": c} for c in candidates],
            "policy": {
                "gates": gates,
                "objective": {"lexicographic": [{"maximize": "pass_rate"}]},
                **policy,
            },
            "selected": candidates[0],
            "rationale": "r",
        }
    )


def record(item: str, passed: bool, tags: list[str] | None = None) -> ItemRecord:
    return {
        "item": item,
        "content": "c",
        "sample": 0,
        "tags": tags or [],
        "cluster": None,
        "key": None,
        "error": None,
        "criteria": {"label": {"passed": passed, "score": float(passed), "detail": ""}},
        "level": "correct" if passed else "unacceptable",
        "score": float(passed),
        "latency_ms": 1,
        "tokens": {"input": 1, "output": 1, "reasoning": 0},
        "cost_micro_usd": 1,
    }


def population(size: int, rates: dict[str, float], seed: int = 0) -> dict[str, list[ItemRecord]]:
    """Each candidate's records over ``size`` items, passing a share ``rates[c]`` of them
    exactly (which ones at random)."""
    rng = random.Random(seed)
    out = {}
    for cand, rate in rates.items():
        passing = set(rng.sample(range(size), round(rate * size)))
        out[cand] = [
            record(f"i{n:05d}", n in passing, ["even" if n % 2 else "odd"]) for n in range(size)
        ]
    return out


def case(sel: schema.Selection, size: int, **params: Any) -> stopping.UseCase:
    items = {f"i{n:05d}": ("even" if n % 2 else "odd",) for n in range(size)}
    return stopping.UseCase(
        "u",
        sel,
        RUBRIC,
        1,
        items,
        purchase_order("md5", list(items)),
        {c.id: f"t/{c.id}" for c in sel.candidates},
        schema.Sequential(**params),
    )


def run(use_case: stopping.UseCase, records: dict[str, list[ItemRecord]]) -> stopping.Stop:
    order = use_case.order

    def buy(want: dict[str, int]) -> dict[str, list[ItemRecord]]:
        out = {}
        for cell, n in want.items():
            inside = set(order[:n])
            out[cell] = [r for r in records[cell.split("/")[1]] if r["item"] in inside]
        return out

    return stopping.schedule([use_case], buy)


def full_decision(sel: schema.Selection, records: dict[str, list[ItemRecord]]) -> str | None:
    task = schema.Task.model_validate(
        {
            "schema_version": 1,
            "description": "d",
            "evalset": "e.jsonl",
            "prompt": {"template": "x"},
            "output": {"parser": "json"},
            "rubric": "r",
        }
    )
    metrics = {
        c: cell_metrics(from_records(rs, ["label"]), task, RUBRIC, "correct", 0.95)
        for c, rs in records.items()
    }
    return policy_decide(sel, metrics, set()).recommended


def test_a_clear_cut_use_case_stops_at_its_first_look_with_the_full_runs_choice() -> None:
    sel = selection(["a", "b"], [{"metric": "pass_rate", "min": 0.7}])
    records = population(2000, {"a": 0.9, "b": 0.5})
    stop = run(case(sel, 2000), records)
    state = stop.states["u"]
    assert state.decided and state.recommended == "a" == full_decision(sel, records)
    assert stop.bought == {"t/a": 100, "t/b": 100}
    assert state.gates[("b", 1)].outcome == "fail"
    assert state.gates[("a", 1)].outcome == "pass"


def test_a_close_comparison_buys_every_item_and_then_agrees_with_the_full_run() -> None:
    sel = selection(["a", "b"], [{"metric": "pass_rate", "min": 0.5}])
    records = population(600, {"a": 0.80, "b": 0.805}, seed=3)
    stop = run(case(sel, 600, round=50), records)
    assert stop.bought == {"t/a": 600, "t/b": 600}
    assert stop.states["u"].recommended == full_decision(sel, records) == "b"


def test_a_candidate_out_of_the_running_stops_being_bought() -> None:
    # c fails its gate at once; a and b are close, so the rounds go on without c.
    sel = selection(["a", "b", "c"], [{"metric": "pass_rate", "min": 0.6}])
    records = population(1000, {"a": 0.85, "b": 0.8, "c": 0.2}, seed=5)
    stop = run(case(sel, 1000, round=100), records)
    assert stop.bought["t/c"] == 100
    assert stop.bought["t/a"] == stop.bought["t/b"] > 100
    assert stop.states["u"].recommended == full_decision(sel, records) == "a"


def test_nobody_passing_is_a_decision_too() -> None:
    sel = selection(["a", "b"], [{"metric": "pass_rate", "min": 0.9}])
    records = population(2000, {"a": 0.5, "b": 0.55})
    stop = run(case(sel, 2000), records)
    assert stop.states["u"].decided and stop.states["u"].recommended is None
    assert full_decision(sel, records) is None
    assert stop.bought == {"t/a": 100, "t/b": 100}


def test_a_gate_on_a_slice_is_over_that_slices_items() -> None:
    sel = selection(["a"], [{"metric": "pass_rate", "slice": "odd", "min": 0.5}])
    use_case = case(sel, 400)
    records = population(400, {"a": 0.9})
    state = stopping.assess(use_case, {"t/a": records["a"][:0]}, {"t/a": 0})
    assert not state.decided
    stop = run(use_case, records)
    assert stop.states["u"].recommended == "a"


def test_a_gate_on_a_bound_becomes_the_count_it_needs_over_every_item() -> None:
    gate = schema.Gate(metric="pass_rate", min=0.8, on="lower_bound")
    threshold, op = stopping.gate_threshold(gate, 500, 0.95) or (None, None)
    assert op == ">=" and threshold is not None
    k = round(threshold * 500)
    assert stats.binary_rate(k, 500, 0.95).lo >= 0.8 > stats.binary_rate(k - 1, 500, 0.95).lo
    upper = schema.Gate(metric="error_rate", max=0.05, on="upper_bound")
    threshold, op = stopping.gate_threshold(upper, 500, 0.95) or (None, None)
    assert op == "<=" and threshold is not None
    k = round(threshold * 500)
    assert stats.binary_rate(k, 500, 0.95).hi <= 0.05 < stats.binary_rate(k + 1, 500, 0.95).hi
    never = schema.Gate(metric="pass_rate", min=0.999, on="lower_bound")
    assert stopping.gate_threshold(never, 20, 0.95) is None


def test_alpha_is_split_over_every_gate_and_pair_fixed_beforehand() -> None:
    sel = selection(
        ["a", "b", "c"],
        [{"metric": "pass_rate", "min": 0.5}, {"metric": "criterion:label", "min": 0.5}],
    )
    use_case = case(sel, 300, alpha=0.06)
    assert use_case.family == 3 * 2 + 3
    records = population(300, {"a": 0.9, "b": 0.5, "c": 0.4})
    cells = {f"t/{c}": rs for c, rs in records.items()}
    state = stopping.assess(use_case, cells, dict.fromkeys(cells, 150))
    assert state.alpha_each == pytest.approx(0.06 / 9)
    verdicts = [*state.gates.values(), *state.pairs.values()]
    assert len(verdicts) == 9
    assert all(v.alpha == pytest.approx(0.06 / 9) for v in verdicts)


@pytest.mark.parametrize(
    ("gates", "policy", "why"),
    [
        ([{"metric": "latency_p95_ms", "max": 900}], {}, "gate 1 is on latency_p95_ms"),
        ([{"metric": "cost_per_item_usd", "max": 1}], {}, "measured over every item"),
        (
            [],
            {
                "objective": {
                    "weighted": [{"maximize": "pass_rate"}, {"minimize": "cost_per_item_usd"}]
                }
            },
            "includes cost_per_item_usd: a weighted objective is settled on rates",
        ),
        (
            [],
            {
                "non_inferiority": {
                    "margin": 0.02,
                    "prefer": {"minimize": "cost_per_item_usd"},
                }
            },
            "non-inferiority",
        ),
    ],
)
def test_what_needs_every_item_is_refused_with_the_reason(
    gates: list[dict[str, Any]], policy: dict[str, Any], why: str
) -> None:
    sel = selection(["a", "b"], gates, **policy)
    found = stopping.refusal(sel, RUBRIC)
    assert found is not None and why in found


def test_a_provider_error_blocks_the_round_rather_than_count_as_a_failure() -> None:
    sel = selection(["a"], [{"metric": "pass_rate", "min": 0.5}])
    records = population(200, {"a": 0.9})["a"]
    records[0] = {**records[0], "error": "server_error", "criteria": {}, "level": None}
    state = stopping.assess(case(sel, 200), {"t/a": records}, {"t/a": 200})
    assert state.blocked is not None and "1 sample without a graded response" in state.blocked
    assert not state.decided


def test_many_use_cases_err_at_most_alpha_against_the_full_run() -> None:
    # Candidates exactly at the gate and equal to each other: the hardest case. Over 60
    # random populations, the stop's choice differs from the full run's at most alpha (a
    # rule stopping on the point estimates errs in about half of them).
    sel = selection(["a", "b"], [{"metric": "pass_rate", "min": 0.7}])
    wrong = 0
    for seed in range(60):
        records = population(200, {"a": 0.7, "b": 0.7}, seed=seed)
        stop = run(case(sel, 200, min_items=50, round=50), records)
        wrong += stop.states["u"].recommended != full_decision(sel, records)
    assert wrong <= 0.05 * 60


def test_a_cell_two_use_cases_read_is_bought_as_far_as_the_later_decision_needs() -> None:
    # "quick" settles at its first look; "strict" (a gate near a and b's rates) needs more.
    # Both read the same cells: they are bought once, as far as "strict" needs, and
    # "quick"'s decision stays settled as they grow.
    quick = case(selection(["a", "b"], [{"metric": "pass_rate", "min": 0.5}]), 1000)
    strict = case(selection(["a", "b"], [{"metric": "pass_rate", "min": 0.82}]), 1000)
    strict = stopping.UseCase(
        "strict",
        strict.selection,
        RUBRIC,
        1,
        strict.items,
        strict.order,
        strict.cells,
        strict.params,
    )
    records = population(1000, {"a": 0.9, "b": 0.6}, seed=11)
    asked: list[dict[str, int]] = []

    def buy(want: dict[str, int]) -> dict[str, list[ItemRecord]]:
        asked.append(dict(want))
        out = {}
        for cell, n in want.items():
            inside = set(quick.order[:n])
            out[cell] = [r for r in records[cell.split("/")[1]] if r["item"] in inside]
        return out

    stop = stopping.schedule([quick, strict], buy)
    assert stop.states["u"].recommended == "a" and stop.reached["u"] == 100
    assert stop.states["strict"].recommended == "a" and stop.reached["strict"] > 100
    assert stop.bought["t/a"] == stop.reached["strict"]
    assert stop.bought["t/b"] == 100  # b failed "strict"'s gate at once, and lost "quick"
    # Each round asks for each cell once, never for fewer items than before.
    for before, after in itertools.pairwise(asked):
        assert all(after[c] >= before[c] for c in before)


def test_with_repeats_the_item_is_the_unit() -> None:
    sel = selection(["a"], [{"metric": "pass_rate", "min": 0.5}])
    use_case = case(sel, 300)
    rng = random.Random(2)
    records = []
    for n in range(300):
        item = f"i{n:05d}"
        for sample in range(3):
            r = record(item, rng.random() < 0.8)
            records.append({**r, "sample": sample})
    state = stopping.assess(use_case, {"t/a": records}, {"t/a": 300})
    verdict = state.gates[("a", 1)]
    # At the last item the interval is the exact mean of the items' mean scores.
    per_item = [
        sum(r["score"] for r in records if r["item"] == f"i{n:05d}") / 3 for n in range(300)
    ]
    assert verdict.interval[0] == pytest.approx(sum(per_item) / 300)
    assert verdict.outcome == "pass"


def test_human_grades_are_refused() -> None:
    rubric = RUBRIC.model_copy(
        update={
            "criteria": [
                *RUBRIC.criteria,
                schema.Criterion.model_validate(
                    {
                        "id": "tone",
                        "description": "d",
                        "grader": {"type": "human", "file": "grades.jsonl"},
                    }
                ),
            ]
        }
    )
    found = stopping.refusal(selection(["a"], []), rubric)
    assert found is not None and "human criteria (tone)" in found
