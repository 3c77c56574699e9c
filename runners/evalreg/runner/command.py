"""``evalreg run`` as one call: options in, a result and its verdict out.

How the run is made fast stays here, out of the caller's sight: the DVC child is started
before the cells are planned (so DVC imports on another core while this one plans), the
registry is loaded once for planning and running, the progress display is built from plans
that hold only what it needs (items and counts: the requests are keyed while the first
ones are bought), and the run is given those plans. The caller chooses only the options and
how progress is shown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from evalreg.cells import use_case_cells, use_cases_of
from evalreg.dvcrepo import require_remote_plugin
from evalreg.registry.loader import Registry, load_registry
from evalreg.runner._dvcworker import Tracker
from evalreg.runner.planning import CellPlan, RunOptions, not_sequential, prepare
from evalreg.runner.run import RunResult, run
from evalreg.store.lock import RepositoryLock

if TYPE_CHECKING:
    from evalreg.runner.until_decided import SequentialRun


class ProgressDisplay(Protocol):
    """Shown while the run buys and grades (``report.terminal.RunProgress``): built from
    the plans, told of every request and graded sample (``streaming.Progress``)."""

    def __enter__(self) -> ProgressDisplay: ...

    def __exit__(self, *exc: object) -> None: ...

    def advance(self, cell_id: str, outcome: str, jobs: int = 1) -> None: ...


@dataclass(frozen=True)
class RunVerdict:
    """What a run did, and whether it did what was asked."""

    result: RunResult
    refusals: list[str] = field(default_factory=list)
    """Cells that could not run and so fail it, each as "CELL cannot run: WHY" (WHY names
    the variable or credentials to set)."""
    failed: bool = False
    """A request failed, a cell was left incomplete, or a cell in ``refusals``."""
    sequential: SequentialRun | None = None
    """The use cases bought until decided, after the other cells' run (``result``)."""

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0


def run_command(
    root: Path,
    options: RunOptions,
    *,
    lock: RepositoryLock | None = None,
    display: Callable[[list[CellPlan]], ProgressDisplay] | None = None,
    on_round: Callable[[int, dict[str, int]], None] | None = None,
) -> RunVerdict:
    """Run the cells ``options`` select and judge the outcome.

    Unless ``options.dry_run`` (which writes nothing), the caller holds ``lock`` (taken
    with ``lock.RepositoryLock`` after ``journal.recover_locked``): the DVC child inherits
    it. ``display`` is built from the plans and told of every request and graded sample.
    A registry that cannot be loaded stops the run before anything is started.
    """
    if options.dry_run:
        registry = load_registry(root)
        result = run(root, options, prepared=prepare(root, options, registry))
        for sid in _sequential(registry, replace(options, dry_run=False)):
            result.notes.append(
                f"use case {sid} is bought until decided: its cells cost at most what is "
                "shown (--all-items buys every item)"
            )
        return RunVerdict(result)
    if lock is None:
        raise ValueError("a run that writes needs the repository lock")
    registry = load_registry(root)
    sequential = _sequential(registry, options)
    if sequential or options.until_decided:
        from evalreg.runner.until_decided import refuse

        refuse(registry, sequential, options)
    if options.push:
        # Before anything is bought: responses the remote cannot receive reach no teammate.
        require_remote_plugin(root)
    options = replace(options, leave=_left_to_sequential(registry, options))
    # DVC gets ready on another core while the cells are planned (a run with nothing to
    # do dismisses it).
    with Tracker(root, lock_fd=lock.fd) as tracker:
        prepared = prepare(root, options, registry, keyed=False)
        if display is None:
            result = run(root, options, prepared=prepared, tracker=tracker)
        else:
            with display(prepared.plans) as shown:
                result = run(
                    root, options, progress=shown.advance, prepared=prepared, tracker=tracker
                )
    verdict = judge(result, options)
    result.notes += _left_notes(registry, options)
    if not sequential:
        return verdict
    from evalreg.runner.until_decided import run_until_decided

    rounds = run_until_decided(root, options, load_registry(root), sequential, on_round)
    failed = verdict.failed or rounds.stop is None or rounds.stop.blocked is not None
    if rounds.final is not None:
        last = judge(rounds.final, options)
        failed = failed or last.failed
        verdict = replace(verdict, refusals=verdict.refusals + last.refusals)
    return replace(verdict, failed=failed, sequential=rounds)


def _left_notes(registry: Registry, options: RunOptions) -> list[str]:
    """What a run that cannot buy in rounds (``--shard``, ``--offline``...) left to one that
    can: the use cases with work whose policy buys them until decided."""
    clash = not_sequential(options)
    if clash is None or options.until_decided or options.all_items:
        return []
    buying = replace(
        options, shard=None, batch=False, limit=None, offline=False, holdout=False, dry_run=False
    )
    return [
        f"use case {sid} is bought until decided (its policy's `sequential`): a run with "
        f"{clash} leaves its cells to a run without it (or run with --all-items)"
        for sid in _sequential(registry, buying)
    ]


def _sequential(registry: Registry, options: RunOptions) -> list[str]:
    """The use cases this run buys until decided (``until_decided.sequential_use_cases``);
    nothing is imported or computed for a run where none can be."""
    if options.all_items or not (
        options.until_decided
        or any(s.policy.sequential is not None for s in registry.selections.values())
    ):
        return []
    from evalreg.results.freshness import status
    from evalreg.runner.until_decided import sequential_use_cases

    return sequential_use_cases(registry, status(registry), options)


def _left_to_sequential(registry: Registry, options: RunOptions) -> frozenset[str]:
    """The cells a plain run leaves alone: those every use case reading them buys until
    decided (``--until-decided``, or its policy's ``sequential`` block)."""
    if options.all_items or options.holdout:
        return frozenset()  # a hold-out set is run whole, as the decision is checked on it
    sequential = {
        sid
        for sid, selection in registry.selections.items()
        if options.until_decided or selection.policy.sequential is not None
    }
    return frozenset(
        cell.id
        for sid in sequential
        for cell in use_case_cells(registry, sid)
        if set(use_cases_of(registry, cell)) <= sequential
    )


def judge(result: RunResult, options: RunOptions) -> RunVerdict:
    """Whether ``result`` is a failure (exit 1), and which blocked cells make it one."""
    failed = any(o.errors or o.note.startswith("incomplete") for o in result.outcomes)
    # A judge request that failed leaves a sample ungraded, whether or not results are
    # written by this run (--limit, --shard).
    failed = failed or bool(result.judge_fetch is not None and result.judge_fetch.errors)
    # A batch that could not be submitted, polled or read is kept for a later run.
    failed = failed or bool(result.batches is not None and result.batches.failures)
    # A cell left pending because a credential is unset here was not bought: a run that
    # was asked to buy it did not do its work (CI must not pass with nothing bought).
    # --allow-pending makes that a note, unless the user named the cell; cells --task and
    # --candidate leave out are not the run's, and --offline never buys (only --strict
    # fails it for a cell that stays pending).
    asked = bool(options.tasks or options.candidates)
    refusals = [
        f"{o.plan.status.cell.id} cannot run: {o.plan.blocked}"
        for o in result.outcomes
        if o.plan.blocked is not None
        and (
            options.strict
            or (o.plan.unset_key is not None and (asked or not options.allow_pending))
        )
    ]
    return RunVerdict(result, refusals, failed or bool(refusals))
