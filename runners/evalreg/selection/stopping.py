"""When a use case's decision is settled before every item is bought (``run --until-decided``).

A wrong decision is one that differs from what a full run of the same eval set would
decide. Items are bought in one seeded order (``sequential.purchase_order``), the same for
every candidate; after each round every statement the recommendation rests on is tested
with a finite-population confidence sequence (``sequential``):

- each candidate's gates: its rate on the gate's slice will be at least (at most) the
  threshold once every item is in. A gate on an interval's bound becomes the count of
  passing items that bound needs over all ``M`` items (Wilson's bound at ``n = M`` is a
  monotone function of that count);
- each pair of candidates, on the objective: which one's full-run score is higher
  (a lexicographic objective's first term, or a weighted objective's weighted sum).

``alpha`` is split evenly (Bonferroni) over all of them, candidates times gates plus the
pairs, fixed before the first round; so with probability at least ``1 - alpha`` over the
order, no statement proved at any round is false, and a decision taken from proved
statements only is the full run's. The decision is settled when one candidate passes every
gate and beats every other candidate that has not failed one, or when every candidate has
failed one. A candidate that has failed a gate, or lost to one that passes them all, is out
of the running: nothing more is bought for it.

Pure: records in, states out. The runner buys what ``schedule`` asks for; ``reproduce``
replays the same rounds from the committed records.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Literal

import numpy as np

from evalreg import sequential, stats
from evalreg.cells import use_case_cells
from evalreg.graders.levels import applies
from evalreg.metrics import item_scores
from evalreg.registry import schema
from evalreg.registry.loader import Registry
from evalreg.registry.rates import refusal
from evalreg.results.outcomes import ERROR, Outcomes, from_records
from evalreg.results.records import ItemRecord
from evalreg.sequential import purchase_order
from evalreg.text.numbers import plural

METHOD = "betting confidence sequences, sampling without replacement (Waudby-Smith & Ramdas 2023)"
"""The method, as the report and the summaries name it."""

DEFAULTS = schema.Sequential()
"""``--until-decided`` for a use case whose policy has no ``sequential`` block."""

__all__ = [
    "DEFAULTS",
    "METHOD",
    "State",
    "Stop",
    "UseCase",
    "assess",
    "assess_outcomes",
    "refusal",
    "schedule",
    "use_case_of",
]


@dataclass(frozen=True)
class UseCase:
    """What deciding one use case needs: its policy and candidates' cells, and its eval
    set's items (id and tags) in the order they are bought."""

    selection_id: str
    selection: schema.Selection
    rubric: schema.Rubric
    repeats: int
    items: Mapping[str, tuple[str, ...]]
    """Item id → tags."""
    order: Sequence[str]
    cells: Mapping[str, str]
    """Candidate id → cell id."""
    params: schema.Sequential

    @property
    def size(self) -> int:
        return len(self.order)

    @property
    def family(self) -> int:
        """How many statements ``alpha`` is split over: every candidate's gates, and every
        pair of candidates when there is a ranking to settle."""
        n = len(self.selection.candidates)
        return n * len(self.selection.policy.gates) + n * (n - 1) // 2


def use_case_of(registry: Registry, sid: str, params: schema.Sequential | None = None) -> UseCase:
    """The use case as ``selection.stopping`` decides it."""
    selection = registry.selections[sid]
    task = registry.tasks[selection.task]
    evalset = registry.evalset_of(selection.task)
    return UseCase(
        sid,
        selection,
        registry.rubrics[task.rubric],
        task.repeats,
        {item.id: tuple(item.tags) for item in evalset.items},
        purchase_order(evalset.md5, [item.id for item in evalset.items]),
        {c.candidate.id: c.id for c in use_case_cells(registry, sid)},
        params or selection.policy.sequential or DEFAULTS,
    )


@dataclass(frozen=True)
class State:
    """A use case after a round: every statement's verdict, the recommendation when it is
    settled, and which candidates are still bought."""

    decided: bool
    recommended: str | None
    running: tuple[str, ...]
    gates: dict[tuple[str, int], sequential.Verdict] = field(default_factory=dict)
    """(candidate, gate number from 1) → verdict."""
    pairs: dict[tuple[str, str], sequential.Verdict] = field(default_factory=dict)
    """(first, second) candidates, in the selection's order → verdict on the objective."""
    alpha_each: float = 0.0
    blocked: str | None = None
    """Why nothing can be decided (a response that errored: the run retries it first)."""


def _population(case: UseCase, metric: str, slice_: str) -> frozenset[str]:
    """The items a rate on ``slice_`` is over: the slice's, and a criterion's only where
    it applies."""
    criterion = None
    if metric.startswith("criterion:"):
        cid = metric.removeprefix("criterion:")
        criterion = next((c for c in case.rubric.criteria if c.id == cid), None)
    return frozenset(
        i
        for i, tags in case.items.items()
        if (slice_ == "all" or slice_ in tags) and (criterion is None or applies(criterion, tags))
    )


def gate_threshold(gate: schema.Gate, size: int, confidence: float) -> tuple[float, str] | None:
    """The threshold a full run's rate must meet for ``gate`` to pass, and the comparison
    (``>=`` or ``<=``); None when no count of passing items can pass it. A gate on the
    point is its own threshold; one on a bound is the count that bound needs over ``size``
    items (Wilson's bound is monotone in the count)."""
    if gate.on == "point":
        return (gate.min, ">=") if gate.min is not None else (float(gate.max or 0.0), "<=")

    def passes(k: int) -> bool:
        rate = stats.binary_rate(k, size, confidence)
        bound = rate.lo if gate.on == "lower_bound" else rate.hi
        return bound >= gate.min if gate.min is not None else bound <= float(gate.max or 0.0)

    if gate.min is not None:  # passing counts are an up-set: the least one
        if not passes(size):
            return None
        lo, hi = 0, size
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if passes(mid) else (mid + 1, hi)
        return lo / size, ">="
    if not passes(0):  # a down-set: the greatest one
        return None
    lo, hi = 0, size
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if passes(mid) else (lo, mid - 1)
    return lo / size, "<="


def _objective_scores(
    case: UseCase, outcomes_scores: Callable[[str], dict[str, float] | None]
) -> dict[str, float] | None:
    """Per item, the objective's score in ``[0, 1]`` (higher is better): its first
    lexicographic term, or its weighted terms' weighted mean."""
    objective = case.selection.policy.objective
    terms = objective.terms[:1] if objective.lexicographic is not None else objective.terms
    total = sum(t.weight for t in terms)
    out: dict[str, float] | None = None
    for term in terms:
        scores = outcomes_scores(term.metric)
        if scores is None:
            return None
        share = term.weight / total
        part = {i: share * (s if term.maximize is not None else 1.0 - s) for i, s in scores.items()}
        out = part if out is None else {i: out[i] + part[i] for i in out if i in part}
    return out


def _scorer(outcomes: Outcomes | None, pass_level: str) -> Callable[[str], dict[str, float] | None]:
    """Per-item scores of a cell's outcomes on a metric, each metric computed once."""
    seen: dict[str, dict[str, float] | None] = {}

    def of(metric: str) -> dict[str, float] | None:
        if metric not in seen:
            seen[metric] = {} if outcomes is None else item_scores(outcomes, metric, pass_level)
        return seen[metric]

    return of


def assess(
    case: UseCase,
    records: Mapping[str, Sequence[ItemRecord]],
    bought: Mapping[str, int],
    *,
    intervals: bool = True,
) -> State:
    """The use case after a round: ``records`` by cell id are each cell's graded samples of
    the first ``bought[cell]`` items of ``case.order``. ``intervals=False``: the verdicts
    without their intervals, which deciding does not need (``schedule``)."""
    criteria = [c.id for c in case.rubric.criteria]
    outcomes = {
        cell: from_records(records[cell], criteria) if records.get(cell) else None
        for cell in case.cells.values()
    }
    return assess_outcomes(case, outcomes, bought, intervals=intervals)


def assess_outcomes(
    case: UseCase,
    outcomes: Mapping[str, Outcomes | None],
    bought: Mapping[str, int],
    *,
    intervals: bool = True,
) -> State:
    """``assess`` from each cell's outcomes (its records as columns)."""
    policy = case.selection.policy
    candidates = [c.id for c in case.selection.candidates]
    size = case.size
    alpha_each = case.params.alpha / max(case.family, 1)
    scores: dict[str, Callable[[str], dict[str, float] | None]] = {}
    for cand in candidates:
        found = outcomes.get(case.cells[cand])
        errors = 0 if found is None else int(np.count_nonzero(found.level == ERROR))
        if errors:
            return State(
                False,
                None,
                tuple(candidates),
                blocked=(
                    f"{cand}: {plural(errors, 'sample')} without a graded response (a provider "
                    "or judge error, or --max-cost); the next run buys what is missing and "
                    "goes on"
                ),
            )
        scores[cand] = _scorer(found, policy.pass_level)
    prefix = {cand: case.order[: bought.get(case.cells[cand], 0)] for cand in candidates}

    gates: list[sequential.Gate] = []
    names: list[tuple[str, int]] = []
    impossible: set[tuple[str, int]] = set()
    for i, gate in enumerate(policy.gates, start=1):
        population = _population(case, gate.metric, gate.slice)
        threshold = gate_threshold(gate, len(population) or 1, policy.confidence)
        for cand in candidates:
            if threshold is None or not population:
                impossible.add((cand, i))
                continue
            per_item = scores[cand](gate.metric) or {}
            xs = [per_item[x] for x in prefix[cand] if x in population and x in per_item]
            op: Literal[">=", "<="] = ">=" if threshold[1] == ">=" else "<="
            gates.append(sequential.Gate(f"{cand} gate {i}", xs, threshold[0], op, len(population)))
            names.append((cand, i))
    comparisons: list[sequential.Comparison] = []
    pair_names: list[tuple[str, str]] = []
    if len(candidates) > 1:
        objective = {cand: _objective_scores(case, scores[cand]) or {} for cand in candidates}
        first_term = policy.objective.terms[0].metric
        population = (
            _population(case, first_term, "all")
            if policy.objective.lexicographic is not None
            else frozenset(case.items)
        )
        for a, b in combinations(candidates, 2):
            shared = [
                x
                for x in case.order[: min(len(prefix[a]), len(prefix[b]))]
                if x in population and x in objective[a] and x in objective[b]
            ]
            comparisons.append(
                sequential.Comparison(
                    f"{a} against {b}",
                    [objective[a][x] for x in shared],
                    [objective[b][x] for x in shared],
                    len(population) or 1,
                )
            )
            pair_names.append((a, b))
    # Each statement at alpha / family, the family fixed before the first round.
    tested = len(gates) + len(comparisons)
    decision = sequential.decide(
        gates, comparisons, size, alpha_each * tested or case.params.alpha, intervals=intervals
    )
    verdicts = iter(decision.verdicts)
    gate_verdicts = {name: next(verdicts) for name in names}
    for name in impossible:
        gate_verdicts[name] = sequential.Verdict(
            f"{name[0]} gate {name[1]}", "fail", (0.0, 1.0), alpha_each
        )
    pair_verdicts = {name: next(verdicts) for name in pair_names}
    return _settle(case, candidates, gate_verdicts, pair_verdicts, alpha_each)


def _settle(
    case: UseCase,
    candidates: list[str],
    gates: dict[tuple[str, int], sequential.Verdict],
    pairs: dict[tuple[str, str], sequential.Verdict],
    alpha_each: float,
) -> State:
    n_gates = len(case.selection.policy.gates)
    eligible: dict[str, bool | None] = {}
    for cand in candidates:
        outcomes = [gates[(cand, i)].outcome for i in range(1, n_gates + 1)]
        eligible[cand] = (
            False if "fail" in outcomes else True if all(o == "pass" for o in outcomes) else None
        )

    def beats(a: str, b: str) -> bool | None:
        if (a, b) in pairs:
            v = pairs[(a, b)].outcome
            return None if v is None else v == "first" or (v == "tie" and a < b)
        v = pairs[(b, a)].outcome
        return None if v is None else v == "second" or (v == "tie" and a < b)

    def dominated(a: str) -> set[str]:
        """Those ``a`` is proved better than, directly or through another: a candidate out
        of the running is compared no more, but what was proved of it still holds."""
        seen: set[str] = set()
        todo = [a]
        while todo:
            x = todo.pop()
            for y in candidates:
                if y != x and y not in seen and beats(x, y) is True:
                    seen.add(y)
                    todo.append(y)
        return seen

    recommended = None
    for cand in candidates:
        if eligible[cand] and all(
            other == cand or eligible[other] is False or other in dominated(cand)
            for other in candidates
        ):
            recommended = cand
            break
    nobody = all(e is False for e in eligible.values())
    decided = recommended is not None or nobody
    running = tuple(
        cand
        for cand in candidates
        if not decided
        and eligible[cand] is not False
        and not any(eligible[r] is True and beats(r, cand) is True for r in candidates if r != cand)
    )
    return State(decided, recommended, running, gates, pairs, alpha_each)


@dataclass(frozen=True)
class Stop:
    """Where a sequential run stopped: each cell's items bought (a prefix of the order),
    and each use case's last state and the items its rounds reached."""

    bought: dict[str, int]
    states: dict[str, State]
    reached: dict[str, int]

    @property
    def blocked(self) -> str | None:
        return next((s.blocked for s in self.states.values() if s.blocked), None)


Buy = Callable[[dict[str, int]], Mapping[str, Sequence[ItemRecord]]]
"""Given each cell's items to have (a prefix of its order), its graded records of them."""


def schedule(cases: Sequence[UseCase], buy: Buy, start: Mapping[str, int] | None = None) -> Stop:
    """Run the rounds: each undecided use case's running candidates are bought up to its
    next round's items (``min_items``, then ``round`` more each time), every use case
    reading a cell is assessed, until all are decided (at the latest, when every item is
    in). A cell several use cases read is bought as far as the furthest still needs it.
    Deterministic given the records ``buy`` returns: the runner buys and grades there,
    ``reproduce`` reads the committed records."""
    bought: dict[str, int] = {cell: 0 for case in cases for cell in case.cells.values()}
    reached = {c.selection_id: min(c.params.min_items, c.size) for c in cases}
    states: dict[str, State] = {}
    running = {c.selection_id: tuple(c.cells) for c in cases}
    while True:
        want = dict(bought)
        for case in cases:
            state = states.get(case.selection_id)
            if state is not None and state.decided:
                continue
            for cand in running[case.selection_id]:
                cell = case.cells[cand]
                want[cell] = max(want[cell], reached[case.selection_id])
        records = buy(want)
        bought = want
        for case in cases:
            state = states.get(case.selection_id)
            if state is not None and state.decided:
                continue
            states[case.selection_id] = assess(case, records, bought, intervals=False)
        if any(s.blocked for s in states.values()):
            return Stop(bought, states, reached)
        undecided = [c for c in cases if not states[c.selection_id].decided]
        if not undecided:
            return Stop(bought, states, reached)
        if all(reached[c.selection_id] == c.size for c in undecided):
            return Stop(bought, states, reached)  # every item in: nothing left to buy
        for case in undecided:
            running[case.selection_id] = states[case.selection_id].running
            reached[case.selection_id] = min(
                reached[case.selection_id] + case.params.round, case.size
            )
