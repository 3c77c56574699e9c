"""``evalreg run``: reconcile results with the registry by running exactly the stale cells.

All stale cells run concurrently in one process: their missing responses are bought in a
single fetch (the store answers the rest), then each cell is graded and its canonical
results are written. A grader change therefore re-grades without a single request.

What is to be bought is planned in ``planning``; bought, graded and written to temporary
files as responses arrive in ``streaming``; here, those steps are run in order under the
run's journal, and the closing step puts the results in place, tracked and pushed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from dataclasses import dataclass, field
from pathlib import Path

from evalreg import dvcrepo
from evalreg.cells import cells
from evalreg.errors import RegistryError
from evalreg.providers.batch import BatchReport, batch_api, fits_a_batch, live_notes
from evalreg.providers.fetch import FetchReport, Job
from evalreg.registry.loader import Registry
from evalreg.registry.tree import WorkspaceTree
from evalreg.results.dvc_metrics import metrics_bytes
from evalreg.results.records import read_summary, summary_from_bytes
from evalreg.runner import interrupts
from evalreg.runner._dvcworker import Tracker
from evalreg.runner.grading import cell_grader
from evalreg.runner.planning import CellPlan, Prepared, RunOptions, prepare
from evalreg.runner.rebuy import LostEvidence
from evalreg.runner.streaming import CellRun, Progress, Purchase
from evalreg.store.journal import Journal, Staged, mark_pushed, unpushed
from evalreg.store.rebought_log import REBOUGHT_LOG, lost_objects, rebought_line
from evalreg.store.rebought_log import read_log as read_rebought
from evalreg.store.segments import STORE_DIR, ResponseStore
from evalreg.text.numbers import plural


@dataclass
class RunResult:
    plans: list[CellPlan]
    outcomes: list[CellRun] = field(default_factory=list)
    fetch: FetchReport | None = None
    judge_fetch: FetchReport | None = None
    """The judges' requests, bought after the candidates' outputs exist."""
    pushed: list[str] = field(default_factory=list)
    push_error: str | None = None
    objects: dvcrepo.StagedObjects = field(default_factory=dvcrepo.StagedObjects)
    """The objects pushed to a remote inside the repository, staged for commit."""
    to_commit: list[str] = field(default_factory=list)
    """What the run leaves to commit: pointers, summaries, metrics, ``dvc.yaml``, and the
    objects of an in-repository remote."""
    batches: BatchReport | None = None
    """What the batch APIs did (a run with ``--batch``, or one that found batches)."""
    notes: list[str] = field(default_factory=list)

    @property
    def estimated_micro_usd(self) -> int:
        """The candidates' requests to buy."""
        return sum(p.estimated_micro_usd for p in self.plans)

    @property
    def batch_saving_micro_usd(self) -> tuple[int, int] | None:
        """(live, batch) estimates of the candidates' requests a ``--batch`` run buys in
        batches; None when none would be."""
        batched = [p for p in self.plans if p.batch_estimated_micro_usd is not None]
        if not any(p.missing for p in batched):
            return None
        return (
            sum(p.estimated_micro_usd for p in batched),
            sum(p.batch_estimated_micro_usd or 0 for p in batched),
        )

    @property
    def judge_estimated_micro_usd(self) -> int:
        return sum(p.judge_estimated_micro_usd for p in self.plans)

    @property
    def judge_requests(self) -> int:
        return sum(p.judge_requests for p in self.plans)


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) during a run, saying how many responses it had stored."""

    def __init__(self, stored: int) -> None:
        super().__init__(stored)
        self.stored = stored


def run(
    root: Path,
    options: RunOptions,
    progress: Progress | None = None,
    prepared: Prepared | None = None,
    tracker: Tracker | None = None,
) -> RunResult:
    """Reconcile: buy what is missing, grade, and write results for the planned cells.

    ``prepared`` is ``prepare(root, options, keyed=False)`` when the caller already has
    it (the CLI needs the plans for its progress display), so the registry is loaded once;
    the requests of its unkeyed cells are keyed as the fetch takes them.
    ``tracker`` is one the caller started before preparing, and closes; without it, one
    is started here if anything is to run. The caller holds the repository lock
    (``lock.RepositoryLock``) and has let ``journal.recover_locked`` repair an
    interrupted run first.

    Until the closing step, nothing but this run's own store segment and temporary files
    is written; the run's journal says what they are, so that a run stopped at any
    instant is completed or rolled back by the next command (``journal``).
    """
    root = root.resolve()
    planned = prepare(root, options) if prepared is None else prepared
    registry, store, plans = planned.registry, planned.store, planned.plans
    result = RunResult(plans)
    if (lost_note := planned.lost.note()) is not None:
        result.notes.append(lost_note)
    # Known before any cell is keyed: a cell is blocked only by a pin that cannot be
    # called, and such a cell is keyed while planning.
    runnable = [p for p in plans if p.blocked is None]
    if options.batch:
        # Planned whole (``_buys_while_planning``). What --batch will buy live, and why
        # (a dry run says it too).
        jobs = [job for p in runnable for job in p.to_buy]
        buying = {p.status.cell.candidate.pin: p.status.cell.pin for p in runnable if p.to_buy}
        result.notes.extend(live_notes(buying))
        result.notes.extend(_too_large_note(jobs, options))
    if options.dry_run:
        return result
    graders = {
        p.status.cell.id: cell_grader(p.status.cell, registry, store, root) for p in runnable
    }
    journal = Journal.begin(root, push=options.push) if runnable else None
    cleanup = contextlib.ExitStack()
    purchase = Purchase(root, options, planned, runnable, graders, journal, cleanup, progress)
    with cleanup:
        # DVC gets ready in a child process while this one fetches and grades.
        if tracker is None and runnable:
            tracker = cleanup.enter_context(Tracker(root))
        try:
            report, result.judge_fetch = (
                asyncio.run(purchase.buy()) if runnable else (FetchReport(), None)
            )
        except KeyboardInterrupt as exc:
            raise RunInterrupted(purchase.written) from exc
        result.fetch, result.batches = report, purchase.batches
        result.outcomes, staged = purchase.finish(report, result.judge_fetch)
        tracked: list[str] = []
        results: list[str] = []
        if journal is not None:
            assert tracker is not None
            tracked, results = _close(
                root,
                options,
                planned,
                result.outcomes,
                staged,
                purchase.judge_keys,
                journal,
                tracker,
            )
        results += _forget_lost_segments(root, planned.lost, result.outcomes)
        _push(root, options, result, tracker)
        result.to_commit = dvcrepo.to_commit(root, tracked, [*results, *result.objects.staged])
    return result


def _close(
    root: Path,
    options: RunOptions,
    planned: Prepared,
    outcomes: list[CellRun],
    staged: list[tuple[Staged, Staged]],
    judge_keys: dict[str, set[str]],
    journal: Journal,
    tracker: Tracker,
) -> tuple[list[str], list[str]]:
    """The closing step: the DVC metrics, ``dvc.yaml`` and the re-bought log staged beside
    the cells' results, then everything put in place and tracked under the journal (a
    stopped run is completed by the next command). Returns the paths tracked, and the
    results put in place."""
    registry = planned.registry
    metrics: list[Staged] = []
    if staged:
        summaries = {s.path: (root / s.tmp).read_bytes() for _, s in staged}
        for rel, data in metrics_updates(root, registry, summaries):
            metrics.append(Staged(journal.tmp_name(rel), rel))
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / metrics[-1].tmp).write_bytes(data)
    index = metrics_index(root, registry, {s.path for s in metrics}) if staged else None
    rebought = _rebought(root, planned.lost, outcomes, journal)
    metrics += rebought
    written = [o.plan for o in outcomes if o.written]
    for rel in _untracked_segments_used(root, planned.store, written, judge_keys):
        if rel not in journal.segments:
            journal.segments.append(rel)
    track = functools.partial(_track, tracker, push=options.push)
    # The closing step runs to its end whatever signal arrives (but SIGKILL, which
    # the journal repairs): results in place, everything tracked.
    with interrupts.deferred():
        tracked = journal.commit(
            [items for items, _ in staged],
            [*(s for _, s in staged), *metrics],
            index,
            track,
        )
    results = [s.path for _, s in staged] + [s.path for s in metrics]
    results += ["dvc.yaml"] if index is not None else []
    return tracked, results


def _track(tracker: Tracker, paths: list[str], *, push: bool) -> None:
    """Track ``paths`` with DVC in the child process (the journal's closing step)."""
    tracker.add(paths)
    if not push:
        # Nothing follows the add: the child exits while results go in place.
        tracker.release()


def _push(root: Path, options: RunOptions, result: RunResult, tracker: Tracker | None) -> None:
    """Push what is owed to the DVC remote (this run's objects, and any an earlier run
    left unpushed), unless ``--no-push``; ``result`` says what was pushed, or why not."""
    owed = unpushed(root) if options.push else []
    if owed:
        result.push_error = tracker.push(owed) if tracker is not None else _push_here(root, owed)
        if result.push_error is None:
            # Staged before the push is marked done: a kill in between leaves the push
            # owed, and the next run's push (a no-op) stages them.
            result.objects = dvcrepo.stage_objects(root, owed)
            mark_pushed(root, owed)
            result.pushed = owed


def _forget_lost_segments(root: Path, lost: LostEvidence, outcomes: list[CellRun]) -> list[str]:
    """Remove the pointers of lost store segments once the re-bought log names them and no
    cell resting on them is left to buy again: a pointer left behind would name an object
    no revision can read. Done after the results are in place, so a run stopped before it
    leaves them to the next run, which removes them; returns the pointers removed."""
    if not lost.segments:
        return []
    written = {o.plan.status.cell.id for o in outcomes if o.written}
    if not set(lost.cells) <= written:
        return []
    logged = lost_objects(read_rebought(WorkspaceTree(root)))
    gone = [o.path for o in lost.segments if o.md5 in logged and (root / o.path).is_file()]
    for rel in gone:
        (root / rel).unlink()
    return gone


def _rebought(
    root: Path, lost: LostEvidence, outcomes: list[CellRun], journal: Journal
) -> list[Staged]:
    """The re-bought log with a line for the cells this run re-bought because their
    evidence was lost, staged to go in place with the results (none if there are none)."""
    cells = [o.plan.status.cell.id for o in outcomes if o.written]
    rebought = [c for c in cells if c in lost.cells]
    if not rebought:
        return []
    objects = sorted({o for c in rebought for o in lost.cells[c]} | set(lost.segments))
    path = root / REBOUGHT_LOG
    before = path.read_bytes() if path.is_file() else b""
    if before and not before.endswith(b"\n"):
        before += b"\n"
    staged = Staged(journal.tmp_name(REBOUGHT_LOG), REBOUGHT_LOG)
    path.parent.mkdir(parents=True, exist_ok=True)
    (root / staged.tmp).write_bytes(before + rebought_line(rebought, objects))
    return [staged]


def _too_large_note(jobs: list[Job], options: RunOptions) -> list[str]:
    """Under ``--batch``, the note on requests bought live because no batch can hold one."""
    if not options.batch or options.offline:
        return []
    large = [j for j in jobs if batch_api(j.pin) is not None and not fits_a_batch(j)]
    if not large:
        return []
    pins = ", ".join(sorted({j.pin_id for j in large}))
    return [
        f"bought live: {plural(len(large), 'request')} of {pins} too large for one batch of "
        "its API (the files they carry, inline)"
    ]


def _untracked_segments_used(
    root: Path, store: ResponseStore, plans: list[CellPlan], judge_keys: dict[str, set[str]]
) -> list[str]:
    """Segments on disk without a pointer here whose responses the written results use.

    The store reads every segment in the working tree, another branch's included (its
    pointer stays on that branch; the file stays, ignored). Results that use one of its
    responses need it tracked on this branch too, or a clean clone could not reproduce
    them; a segment nothing here uses is left alone, so it never joins an unrelated PR.
    The pointer is the same file on both branches, so they still merge cleanly.
    """
    untracked = {
        name
        for name in store.names
        if (root / STORE_DIR / name).is_file() and not (root / STORE_DIR / f"{name}.dvc").exists()
    }
    if not untracked:  # as after most runs: no result's keys need searching for
        return []
    names: set[str] = set()
    for plan in plans:
        names.update(store.segments_of(plan.keys))
        names.update(store.segments_of(list(judge_keys.get(plan.status.cell.id, ()))))
    return [f"{STORE_DIR}/{name}" for name in sorted(names & untracked)]


def _push_here(root: Path, paths: list[str]) -> str | None:
    return dvcrepo.push(root, paths)


def metrics_updates(
    root: Path, registry: Registry, written: dict[str, bytes]
) -> list[tuple[str, bytes]]:
    """The DVC metrics files to write, as (path, content): each cell's whose summary is
    ``written`` now (summary path → its bytes) or on disk, where the file is missing or is
    not its summary's (written by an older evalreg, or taken from one side of a merge)."""
    here = WorkspaceTree(root)
    out = []
    for cell in cells(registry) + cells(registry, "holdout"):
        data = written.get(cell.summary_path)
        try:
            summary = (
                summary_from_bytes(data, cell.summary_path)
                if data is not None
                else read_summary(here, cell)
            )
        except RegistryError:
            continue  # a damaged summary: `check` names it; its metrics are not ours to guess
        if summary is None:
            continue
        content = metrics_bytes(summary)
        path = root / cell.metrics_path
        if not path.is_file() or path.read_bytes() != content:
            out.append((cell.metrics_path, content))
    return out


def metrics_index(root: Path, registry: Registry, also: set[str]) -> str:
    """``dvc.yaml`` listing every cell's metrics file, for ``dvc metrics show/diff``: the
    files on disk, and ``also`` (those this run is about to put in place)."""
    paths = sorted(
        c.metrics_path
        for c in cells(registry) + cells(registry, "holdout")
        if c.metrics_path in also or (root / c.metrics_path).is_file()
    )
    lines = [
        "# Written by evalreg run: every cell's rates and cost per slice, for",
        "# `dvc metrics show` and `dvc metrics diff` (reports/metrics/, from the summaries).",
        "metrics:",
    ] + [f"  - {p}" for p in paths]
    return "\n".join(lines) + "\n"
