"""``evalreg run --until-decided``: buy a use case's items in rounds, in one seeded order,
and stop once its decision is settled (``selection.stopping``).

Each round is a run of its own (``run.run`` with ``RunOptions.only``): it buys the next
items' responses and their judges' and stores them, writing no results, so that a run
stopped at any instant loses nothing and a resumed one buys only what is missing. Between
rounds the cells' new items are graded here, in memory, and every use case is assessed.
The last round writes each cell's results on the items bought, its summary saying where the
run stopped and why (``records.SequentialStop``); a cell whose every item was bought is
written as any other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from evalreg.cells import use_case_cells
from evalreg.errors import UsageError
from evalreg.providers.fetch import FetchReport
from evalreg.registry import schema
from evalreg.registry.loader import Registry
from evalreg.registry.tree import WorkspaceTree
from evalreg.results.freshness import CellStatus, status
from evalreg.results.records import ItemRecord, SequentialStop, UseCaseStop, read_records
from evalreg.runner.grading import cell_grader
from evalreg.runner.planning import RunOptions, not_sequential
from evalreg.runner.rebuy import open_store
from evalreg.runner.run import RunResult, run
from evalreg.selection.stopping import (
    DEFAULTS,
    METHOD,
    Stop,
    UseCase,
    refusal,
    schedule,
    use_case_of,
)

ORDER = "sha256(eval set md5, seed 0, item id), ascending"
"""How the purchase order is made, as the summaries record it."""


def sequential_use_cases(
    registry: Registry, statuses: Sequence[CellStatus], options: RunOptions
) -> list[str]:
    """The use cases this run decides sequentially: with ``--until-decided`` every use case
    with a cell to run (its tasks and candidates as ``options`` select them), else those
    whose policy has a ``sequential`` block. A use case whose every cell is complete or
    decided has nothing to buy and is left out."""
    by_id = {st.cell.id: st for st in statuses}
    if not options.until_decided and not_sequential(options):
        return []  # such a run leaves those use cases' cells alone (``run_command``)
    out = []
    for sid in sorted(registry.selections):
        selection = registry.selections[sid]
        if not options.until_decided and selection.policy.sequential is None:
            continue
        if options.tasks and selection.task not in options.tasks:
            continue
        cells = use_case_cells(registry, sid)
        if options.candidates and not any(c.candidate.id in options.candidates for c in cells):
            continue
        if any(by_id[c.id].state != "fresh" for c in cells):
            out.append(sid)
    return out


def refuse(registry: Registry, use_cases: Sequence[str], options: RunOptions) -> None:
    """``UsageError`` when the run cannot be sequential: options that buy otherwise, or a use
    case whose decision needs every item (named, with the reason)."""
    if not use_cases and not options.until_decided:
        return
    clash = not_sequential(options)
    if clash is not None:
        raise UsageError(
            f"--until-decided cannot be combined with {clash}: rounds are bought live, one "
            "after another, each graded before the next"
        )
    for sid in use_cases:
        selection = registry.selections[sid]
        rubric = registry.rubrics[registry.tasks[selection.task].rubric]
        why = refusal(selection, rubric)
        if why is not None:
            raise UsageError(f"use case {sid} cannot be decided on part of its items: {why}")


@dataclass
class SequentialRun:
    """What a sequential run did: where it stopped, each round's run, and the last one's
    (which wrote the results)."""

    stop: Stop | None
    cases: list[UseCase]
    rounds: list[RunResult] = field(default_factory=list)
    final: RunResult | None = None
    sizes: dict[str, int] = field(default_factory=dict)
    """By cell id, its eval set's items."""
    stops: dict[str, SequentialStop] = field(default_factory=dict)
    """The cells written on part of their items, with where they stopped."""

    @property
    def requests_bought(self) -> int:
        return sum(
            (r.fetch.fetched if r.fetch else 0) + (r.judge_fetch.fetched if r.judge_fetch else 0)
            for r in [*self.rounds, *([self.final] if self.final else [])]
        )


def run_until_decided(
    root: Path,
    options: RunOptions,
    registry: Registry,
    use_cases: Sequence[str],
    on_round: Callable[[int, dict[str, int]], None] | None = None,
) -> SequentialRun:
    """Buy the use cases' items in rounds until every one is decided, then write the
    results (the caller holds the repository lock)."""
    statuses = {st.cell.id: st for st in status(registry)}
    cases = [use_case_of(registry, sid, _params(registry, sid, options)) for sid in use_cases]
    complete = {
        cell
        for case in cases
        for cell in case.cells.values()
        if statuses[cell].state == "fresh" and statuses[cell].decided is None
    }
    cell_of = {c.id: c for case in cases for c in use_case_cells(registry, case.selection_id)}
    order = {cell: case.order for case in cases for cell in case.cells.values()}
    done = SequentialRun(None, list(cases))
    done.sizes = {cell: len(o) for cell, o in order.items()}
    graded: dict[str, list[ItemRecord]] = {}
    have: dict[str, int] = {}
    committed: dict[str, list[ItemRecord]] = {}
    # Every cell of the use cases, whatever --task and --candidate chose: a decision needs
    # all its candidates. Each round pushes what it bought, as any run does.
    round_options = replace(options, until_decided=False, tasks=(), candidates=())

    def buy(want: dict[str, int]) -> Mapping[str, Sequence[ItemRecord]]:
        running = {
            cell: frozenset(order[cell][:n])
            for cell, n in want.items()
            if cell not in complete and n > have.get(cell, 0)
        }
        if running:
            result = run(root, replace(round_options, only=running))
            done.rounds.append(result)
            blocked = [p for p in result.plans if p.blocked is not None]
            if blocked:
                raise UsageError(
                    "; ".join(f"{p.status.cell.id} cannot run: {p.blocked}" for p in blocked)
                )
            store, _ = open_store(root)
            for plan in result.plans:
                cell_id = plan.status.cell.id
                new = frozenset(order[cell_id][have.get(cell_id, 0) : want[cell_id]])
                grader = cell_grader(plan.status.cell, registry, store, root)
                graded.setdefault(cell_id, []).extend(
                    grader.record(item, sample, key, store.get(key), None)
                    for item, sample, key in plan.samples()
                    if item.id in new
                )
                have[cell_id] = want[cell_id]
        out: dict[str, Sequence[ItemRecord]] = {}
        for cell, n in want.items():
            if cell in complete:
                if cell not in committed:
                    committed[cell] = read_records(WorkspaceTree(root), cell_of[cell])
                inside = frozenset(order[cell][:n])
                out[cell] = [r for r in committed[cell] if r["item"] in inside]
            else:
                out[cell] = graded.get(cell, [])
        if on_round is not None:
            on_round(len(done.rounds), dict(want))
        return out

    done.stop = stop = schedule(cases, buy)
    if stop.blocked is not None:
        return done
    written = {cell: n for cell, n in stop.bought.items() if cell not in complete}
    for cell, n in written.items():
        if n < done.sizes[cell]:
            done.stops[cell] = _stop_record(cell, n, done.sizes[cell], cases, stop)
    final = replace(
        round_options,
        only={cell: frozenset(order[cell][:n]) for cell, n in written.items()},
        decided=done.stops,
    )
    done.final = run(root, final)
    # The last round buys nothing: what it reports is what the rounds bought, pushed and
    # left to commit (its own push takes whatever an earlier round could not push).
    last, rounds = done.final, done.rounds
    last.fetch = _bought(last.fetch, [r.fetch for r in rounds])
    last.judge_fetch = _bought(last.judge_fetch, [r.judge_fetch for r in rounds])
    last.to_commit = list(
        dict.fromkeys([*(p for r in rounds for p in r.to_commit), *last.to_commit])
    )
    last.pushed = list(dict.fromkeys([*(p for r in rounds for p in r.pushed), *last.pushed]))
    return done


def _bought(last: FetchReport | None, rounds: list[FetchReport | None]) -> FetchReport | None:
    """``last`` (the closing round's report) counting as bought what the rounds bought."""
    if last is None:
        return None
    fetched = sum(r.fetched for r in rounds if r is not None)
    shared = sum(r.shared for r in rounds if r is not None)
    errors = [e for r in rounds if r is not None for e in r.errors]
    cached = max(0, last.cached - fetched - shared)
    return replace(
        last,
        fetched=last.fetched + fetched,
        shared=last.shared + shared,
        cached=cached,
        errors=[*errors, *last.errors],
    )


def _params(registry: Registry, sid: str, options: RunOptions) -> schema.Sequential:
    """The use case's policy block, else the defaults; a round at least the concurrency."""
    params = registry.selections[sid].policy.sequential or DEFAULTS
    if params.round < options.max_concurrency and params.round < len(
        registry.evalset_of(registry.selections[sid].task).items
    ):
        params = params.model_copy(update={"round": options.max_concurrency})
    return params


def replay(
    registry: Registry,
    recorded: Mapping[str, SequentialStop],
    records_of: Callable[[str], Sequence[ItemRecord]],
) -> dict[str, list[str]]:
    """Run the rounds again on recorded records: by cell id, how what ``recorded`` says
    (each cell's stop, by id) differs from where the rule stops (nothing: the same). The
    use cases are those the stops name, with the parameters they record; ``records_of``
    gives a cell's recorded records (every item it has)."""
    params: dict[str, schema.Sequential] = {}
    for record in recorded.values():
        for sid, given in record.get("use_cases", {}).items():
            params.setdefault(
                sid,
                schema.Sequential(
                    alpha=given["alpha"], min_items=given["min_items"], round=given["round"]
                ),
            )
    cases = [
        use_case_of(registry, sid, p)
        for sid, p in sorted(params.items())
        if sid in registry.selections
    ]
    known: dict[str, Sequence[ItemRecord]] = {}
    order = {cell: case.order for case in cases for cell in case.cells.values()}

    def buy(want: dict[str, int]) -> Mapping[str, Sequence[ItemRecord]]:
        out = {}
        for cell, n in want.items():
            if cell not in known:
                known[cell] = records_of(cell)
            inside = frozenset(order[cell][:n])
            out[cell] = [r for r in known[cell] if r["item"] in inside]
        return out

    stop = schedule(cases, buy)
    differences: dict[str, list[str]] = {}
    for cell, record in recorded.items():
        found = []
        again = stop.bought.get(cell)
        if again != record["items"]:
            found.append(
                f"stopping point: recorded after {record['items']} of {record['of']} items, "
                f"the rule stops after {again} on these records"
            )
        for sid, given in record.get("use_cases", {}).items():
            if stop.reached.get(sid) != given["reached"]:
                found.append(
                    f"stopping point of use case {sid}: recorded at {given['reached']} items, "
                    f"the rule stops at {stop.reached.get(sid)}"
                )
        if found:
            differences[cell] = found
    return differences


def _stop_record(
    cell: str, items: int, size: int, cases: Sequence[UseCase], stop: Stop
) -> SequentialStop:
    readers: dict[str, UseCaseStop] = {
        case.selection_id: {
            "alpha": case.params.alpha,
            "min_items": case.params.min_items,
            "round": case.params.round,
            "reached": stop.reached[case.selection_id],
        }
        for case in cases
        if cell in case.cells.values()
    }
    return {"items": items, "of": size, "method": METHOD, "order": ORDER, "use_cases": readers}


__all__ = [
    "SequentialRun",
    "refuse",
    "run_until_decided",
    "sequential_use_cases",
    "use_case_of",
]
