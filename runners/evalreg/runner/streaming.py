"""Buying a run's missing responses, and grading and writing cells as they arrive.

``Purchase`` sends the candidates' requests the plan lists (live, or through a batch API),
then the judges' requests for every output graded. A cell whose criteria need no judge is
graded while its responses arrive (``_CellStream``), its records written to a temporary
file; every cell is finished once the buying is over: graded whole, or left as it was with
a note saying why (``_finish``). Nothing here puts a result in place: the run's closing
step does that, under its journal.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from evalreg.cells import Cell
from evalreg.providers import all_providers
from evalreg.providers.base import Completion, credentials_problem
from evalreg.providers.batch import BATCHED, BatchReport, buy_in_batches, fits_a_batch
from evalreg.providers.fetch import FetchReport, Job, fetch
from evalreg.providers.pricing import cost_micro_usd
from evalreg.registry import schema
from evalreg.registry.loader import Registry
from evalreg.results.records import ItemRecord, coverage_counts, spend_micro_usd
from evalreg.results.tally import CellTally
from evalreg.runner._cellwriter import CellWriter
from evalreg.runner._gradepool import grade_all
from evalreg.runner.grading import CellGrader
from evalreg.runner.planning import (
    CellPlan,
    Prepared,
    RunOptions,
    estimate_micro_usd,
    key_in_shard,
    keys_in_shard,
    unauthenticated,
)
from evalreg.store.batches import BatchJournal
from evalreg.store.journal import Journal, Staged
from evalreg.store.segments import STORE_DIR, ResponseStore, SegmentWriter, segment_name
from evalreg.text.numbers import plural

if TYPE_CHECKING:
    from evalreg.providers.http import HttpLayer

_REPORT_EVERY = 1000
"""Graded samples between two progress reports (each costs the display some work)."""


@dataclass
class CellRun:
    """What the run did for one cell: its results written or not (``note`` says why),
    its errors, what it cost, and its human criteria's coverage."""

    plan: CellPlan
    written: bool = False
    errors: int = 0
    cost_micro_usd: int = 0
    """What the cell's samples cost to run: candidate and judge responses. For a cell
    whose results the run did not write (``--shard``, ``--limit``, responses missing),
    what the responses it bought for the cell cost."""
    judge_cost_micro_usd: int = 0
    note: str = ""
    coverage: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Per human criterion of the cell's rubric: (graded, applicable) samples."""


Progress = Callable[[str, str, int], None]
"""Called with (cell id, outcome, jobs) as jobs finish: cached, fetched, shared or error,
or for judge requests "judge cached", "judge fetched", "judge shared" or "judge error"."""


class Purchase:
    """What one run buys and grades: the candidates' missing responses, cell after cell,
    keyed as the fetch asks for them (live, or through batch APIs), then the judges'
    requests for every output graded; a cell whose criteria need no judge is graded as its
    responses arrive. ``finish`` grades the rest once the buying is over.

    ``cleanup`` closes the cells' streams (a cell's temporary file, if it is left
    incomplete) when the run is over; ``journal`` (None: nothing is runnable) names the
    store segment written here before it exists.
    """

    def __init__(
        self,
        root: Path,
        options: RunOptions,
        planned: Prepared,
        runnable: list[CellPlan],
        graders: dict[str, CellGrader],
        journal: Journal | None,
        cleanup: contextlib.ExitStack,
        progress: Progress | None = None,
    ) -> None:
        self.root, self.options, self.planned, self.runnable = root, options, planned, runnable
        self.registry, self.store = planned.registry, planned.store
        self.graders, self.journal, self.cleanup = graders, journal, cleanup
        self.progress = progress
        self.budget = _Budget(options.max_cost_usd)
        if self.budget.active:
            # Planned whole: every request is admitted by the estimates of the whole plan.
            self.budget.output_tokens = {
                j.key: p.observed_tokens for p in runnable for j in p.to_buy
            }
            self.budget.judges = {k: v for p in runnable for k, v in p.judge_estimates.items()}
        self.cell_of: dict[int, str] = {}
        """The cell of each job, by ``id``: cells may send the same request (one key), and
        each counts its own job, bought, shared or from the store."""
        self.bought = _Bought()
        self.streams = {
            p.status.cell.id: self.stream_of(p) for p in runnable if _streams(p, options)
        }
        self.judge_keys: dict[str, set[str]] = {}
        """By cell, the keys of the judge requests its graded outputs need."""
        self.judge_cell: dict[int, str] = {}
        """The cell of each judge job, by ``id``: cells may send the same judge request."""
        self.writers: list[SegmentWriter] = []
        self.providers = all_providers(root)
        self.batches: BatchReport | None = None
        """What the batch APIs did (a run with ``--batch``, or one that found batches)."""

    @property
    def written(self) -> int:
        """Responses stored so far by this run."""
        return sum(w.written for w in self.writers)

    def stream_of(self, plan: CellPlan) -> _CellStream:
        assert self.journal is not None
        cell_id = plan.status.cell.id
        return self.cleanup.enter_context(
            _CellStream(
                self.root,
                plan,
                self.graders[cell_id],
                self.store,
                self.journal.tmp_name,
                self.progress,
            )
        )

    def to_buy(self) -> Iterator[Job]:
        """The requests to buy, cell after cell, keyed as the fetch asks for them: the
        first are bought while later ones are still being keyed."""
        for plan in self.runnable:
            cell_id = plan.status.cell.id
            for job in self.planned.requests(plan):
                self.cell_of[id(job)] = cell_id
                yield job
            # Stored responses were found while keying: count them, don't fetch them.
            cached = plan.in_shard - len(plan.to_buy)
            if self.progress is not None and cached:
                self.progress(cell_id, "cached", cached)

    def on_job(self, job: Job, outcome: str) -> None:
        cell_id = self.cell_of.get(id(job), "?")
        if outcome == "fetched":
            self.bought.candidates.setdefault(cell_id, []).append(job)
        if self.progress is not None:
            self.progress(cell_id, outcome, 1)
        if outcome != "error" and cell_id in self.streams:
            self.streams[cell_id].advance()

    def judge_jobs(self) -> list[Job]:
        """Judge requests for every graded output of this run (after phase one)."""
        out = []
        for plan in self.runnable:
            cell_id = plan.status.cell.id
            grader = self.graders[cell_id]
            if not _judged(plan.status.cell):
                continue
            mine = self.judge_keys.setdefault(cell_id, set())
            needed: list[Job] = []
            for item, sample, key in plan.samples():
                stored = self.store.get(key) if key_in_shard(key, self.options.shard) else None
                if stored is not None:
                    jobs = grader.judge_jobs(item, sample, stored)
                    mine.update(job.key for job in jobs)
                    self.budget.cover(key, jobs)
                    needed.extend(jobs)
            blocked = None if self.options.offline else _unauthenticated_judge(needed, self.store)
            if blocked is not None:
                # Its responses were all stored before (a cell with any to buy is asked
                # while planning): it is left as it was, as a cell whose own key is unset.
                plan.blocked, plan.unset_key = blocked
                continue
            for job in needed:
                self.judge_cell[id(job)] = cell_id
            out.extend(needed)
        return out

    def on_judge_job(self, job: Job, outcome: str) -> None:
        cell_id = self.judge_cell.get(id(job), "?")
        if outcome == "fetched":
            self.bought.judges.setdefault(cell_id, []).append(job)
        if self.progress is not None:
            self.progress(cell_id, f"judge {outcome}", 1)

    async def buy(self) -> tuple[FetchReport, FetchReport | None]:
        """Buy the candidates' missing responses, then the judges' requests: what each
        fetch did (None: no judge request was needed)."""
        options = self.options
        label = f"shard{options.shard[0]}of{options.shard[1]}" if options.shard else "run"
        layer = None
        if not options.offline:
            # Offline nothing is sent and no batch is asked about: neither the HTTP layer
            # nor httpx is even imported.
            from evalreg.providers.http import HttpLayer

            network = self.registry.settings.network
            layer = HttpLayer(ca_bundle=network.ca_bundle, root=self.root)
        async with layer or contextlib.nullcontext() as http:
            writer = None
            if not options.offline:
                # Listed before it exists: a run stopped in between leaves no segment that
                # its journal does not name, and a reader never sees it as nobody's.
                name = segment_name(label)
                assert self.journal is not None
                self.journal.add_segment(f"{STORE_DIR}/{name}")
                writer = SegmentWriter(self.root, name=name)
                self.writers.append(writer)
            try:
                report = await self._buy_candidates(http, writer)
                judged = self.judge_jobs()
                second = (
                    await fetch(
                        judged,
                        self.store,
                        writer,
                        http,
                        offline=options.offline,
                        concurrency=options.max_concurrency,
                        progress=self.on_judge_job,
                        admit=self.budget.admit if self.budget.active else None,
                    )
                    if judged
                    else None
                )
                return report, second
            finally:
                if writer is not None:
                    writer.close()

    async def _buy_candidates(
        self, http: HttpLayer | None, writer: SegmentWriter | None
    ) -> FetchReport:
        """Buy the candidates' missing responses (live, and in batches where a batch API
        takes them): what the fetch did, the responses the store held counted as cached."""
        options, budget = self.options, self.budget
        live, batched = _by_batch(self.to_buy(), options, self.root)
        report = await fetch(
            live,
            self.store,
            writer,
            http,
            offline=options.offline,
            concurrency=options.max_concurrency,
            progress=self.on_job,
            admit=budget.admit if budget.active else None,
        )
        if batched is not None:
            assert http is not None  # batches are never asked about offline
            providers = self.providers
            pins = {
                pin_id: (pin, providers[pin.provider])
                for pin_id, pin in self.registry.pins.items()
                if credentials_problem(providers[pin.provider], pin) is None
            }
            in_batches, self.batches = await buy_in_batches(
                batched[1],
                self.store,
                writer,
                http,
                batched[0],
                pins,
                submit=options.batch,
                wait=options.batch and options.wait,
                poll_s=options.batch_poll_s,
                progress=self.on_job,
                admit=budget.admit_batched if budget.active else None,
            )
            _merge(report, in_batches)
        stored = sum(p.in_shard - len(p.to_buy) for p in self.runnable)
        report.total += stored
        report.cached += stored
        return report

    def finish(
        self, report: FetchReport, judge_fetch: FetchReport | None
    ) -> tuple[list[CellRun], list[tuple[Staged, Staged]]]:
        """Every planned cell's outcome, in plan order, once the buying is over; and the
        (records, summary) files staged for each cell whose results are written."""
        failed = {e.key: e.kind for e in report.errors}
        if self.batches is not None:
            failed.update(dict.fromkeys(self.batches.waiting, BATCHED))
        if judge_fetch is not None:
            causes = judge_causes(judge_fetch)
            for grader in self.graders.values():
                if grader.judges is not None:
                    grader.judges.failed.update(causes)
        outcomes: list[CellRun] = []
        staged: list[tuple[Staged, Staged]] = []
        for plan in self.planned.plans:
            cell_id = plan.status.cell.id
            stream = self.streams.get(cell_id)
            if stream is None and cell_id in self.graders:
                stream = self.stream_of(plan)
            outcome = _finish(self.registry, plan, failed, self.options, stream)
            if not outcome.written:
                # No summary to read it from (--shard, --limit, or responses missing).
                self.bought.charge(outcome, self.store)
            outcomes.append(outcome)
            if outcome.written and stream is not None and stream.writer.staged is not None:
                staged.append(stream.writer.staged)
        return outcomes, staged


def _by_batch(
    jobs: Iterable[Job], options: RunOptions, root: Path
) -> tuple[Iterable[Job], tuple[BatchJournal, list[Job]] | None]:
    """The jobs to buy live, and the batch journal with the jobs for batches: with
    ``--batch`` every job whose provider has a batch API; without it, only those already
    waiting in a journalled batch (never bought again live). None: no batch is involved."""
    if options.offline:
        return jobs, None
    journal = BatchJournal.load(root)
    held = journal.pending_keys()
    if not options.batch and not journal.batches:
        return jobs, None
    live: list[Job] = []
    batched: list[Job] = []
    for job in jobs:
        to_batch = job.key in held or (options.batch and fits_a_batch(job))
        (batched if to_batch else live).append(job)
    return live, (journal, batched)


def _merge(report: FetchReport, other: FetchReport) -> None:
    report.total += other.total
    report.cached += other.cached
    report.fetched += other.fetched
    report.shared += other.shared
    report.errors.extend(other.errors)


def _unauthenticated_judge(jobs: list[Job], store: ResponseStore) -> tuple[str, str] | None:
    """``unauthenticated`` for the first judge pin of ``jobs`` (by id) that cannot be
    authenticated here and has a request the store lacks; or None."""
    pins: dict[str, Job] = {}
    for job in jobs:
        pins.setdefault(job.pin_id, job)
    for pin_id in sorted(pins):
        found = unauthenticated(pin_id, pins[pin_id].pin, pins[pin_id].provider, judge=True)
        if found is not None and any(j.key not in store for j in jobs if j.pin_id == pin_id):
            return found
    return None


def _streams(plan: CellPlan, options: RunOptions) -> bool:
    """Whether the cell is graded while its responses arrive: it writes results and no
    criterion waits for a judge's response (those are bought after the fetch)."""
    return (
        options.shard is None
        and options.limit is None
        and (options.only is None or options.decided is not None)
        and not _judged(plan.status.cell)
    )


def _judged(cell: Cell) -> bool:
    """Whether a criterion of the cell is graded by a judge model."""
    return any(isinstance(c.grader, schema.MODEL_GRADED) for c in cell.rubric.criteria)


class _CellStream:
    """Grades a cell's samples in (item, sample) order as their responses are stored, so
    grading overlaps the requests still in flight; the records stream to a ``CellWriter``.

    ``advance`` grades only stored responses: whether a missing one is an error is known
    when the fetch is over, and ``drain`` grades the rest then. A cell that turns out
    incomplete leaves its temporary file behind for the writer to remove, and its previous
    results untouched.
    """

    def __init__(
        self,
        root: Path,
        plan: CellPlan,
        grader: CellGrader,
        store: ResponseStore,
        tmp_name: Callable[[str], str],
        progress: Progress | None = None,
    ) -> None:
        self.root, self.plan, self.grader, self.store = root, plan, grader, store
        self.tmp_name = tmp_name
        self.done = 0
        """Samples graded: the plan's keys grow while the run keys its later requests."""
        self._writer: CellWriter | None = None
        self.progress = progress
        self.unreported = 0

    def _graded(self, n: int, *, flush: bool = False) -> None:
        """Tell ``progress`` about graded samples, a thousand at a time (or now)."""
        self.unreported += n
        if self.progress is not None and (flush or self.unreported >= _REPORT_EVERY):
            if self.unreported:
                self.progress(self.plan.status.cell.id, "graded", self.unreported)
            self.unreported = 0

    @property
    def writer(self) -> CellWriter:
        """Opened with the first record: a cell that never grades creates no file."""
        if self._writer is None:
            self._writer = CellWriter(self.root, self.plan.status.cell, self.tmp_name)
        return self._writer

    def advance(self) -> None:
        # Called as each response arrives: the next sample's key is looked at first, and
        # its item is read only once its response is there (an eval set read back from its
        # file keeps the block of items last read, so each block is read once).
        plan, repeats = self.plan, self.plan.status.cell.task.repeats
        keys, items = plan.keys, plan.items
        while self.done < len(keys):
            key = keys[self.done]
            stored = self.store.get(key)
            if stored is None:
                return
            item, sample = items[self.done // repeats], self.done % repeats
            self.writer.add(self.grader.record(item, sample, key, stored, None))
            self._graded(1)
            self.done += 1

    def drain(self, failed: dict[str, str]) -> None:
        """Grade every sample not graded yet (``failed``: the error of each key the fetch
        could not buy); a long remainder is graded by several processes."""
        cell = self.plan.status.cell
        rest = self.plan.samples(self.done)
        self.done += len(rest)
        if not rest:
            self._graded(0, flush=True)
            return

        def grade(
            item: schema.Item, sample: int, key: str, stored: dict[str, Any] | None
        ) -> ItemRecord:
            return self.grader.record(item, sample, key, stored, failed.get(key))

        criteria = [c.id for c in cell.rubric.criteria]
        writer = self.writer

        def add(record: ItemRecord) -> None:
            writer.add(record)
            self._graded(1)

        def add_graded(lines: BinaryIO, tally: CellTally) -> None:
            writer.add_graded(lines, tally)
            self._graded(len(tally.levels))

        grade_all(rest, grade, self.store.get_many, criteria, add, add_graded)
        self._graded(0, flush=True)

    def __enter__(self) -> _CellStream:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._writer is not None:
            self._writer.__exit__(None, None, None)


def _finish(
    registry: Registry,
    plan: CellPlan,
    failed: dict[str, str],
    options: RunOptions,
    stream: _CellStream | None,
) -> CellRun:
    cell = plan.status.cell
    outcome = CellRun(plan)
    if plan.blocked is not None:
        outcome.note = f"pending: {plan.blocked}"
        return outcome
    store = stream.store if stream is not None else None
    keys = plan.keys
    # Only the keys the store lacks are looked at one by one: none, in a replay.
    lacking = store.absent(keys) if store is not None else range(len(keys))
    inside = None if options.shard is None or not lacking else keys_in_shard(keys, options.shard)
    unresolved: list[str] = []
    errored: list[str] = []
    # Requests that failed count as errors: a smoke test that bought nothing is no success.
    # A response waiting in a batch is no failure: a later run collects it.
    errors = 0
    for at in lacking:
        if inside is not None and not inside[at]:
            continue
        key = keys[at]
        cause = failed.get(key)
        if cause in (None, "offline_miss", "budget", BATCHED):
            unresolved.append(key)
        else:
            errored.append(key)
        if cause != BATCHED:
            errors += 1
    partial = (
        options.shard is not None
        or options.limit is not None
        or (options.only is not None and options.decided is None)
    )
    if unresolved or partial:
        # Under --shard or --limit no results are written, errors or not: a request that
        # failed is as missing as one that was never sent, and nothing claims otherwise.
        missing = [*unresolved, *errored] if partial else unresolved
        stopped = {failed.get(k) for k in missing}
        waiting = sum(1 for k in missing if failed.get(k) == BATCHED)
        if missing and waiting == len(missing):
            outcome.note = (
                f"waiting: {plural(waiting, 'response')} in submitted batches; "
                "`evalreg run --batch` collects them, then writes results"
            )
        else:
            outcome.note = (
                "every response stored; results are written by a run without --shard or --limit"
                if not missing
                else f"incomplete ({plural(len(missing), 'response')} missing: "
                f"{', '.join(sorted(s or 'unsent' for s in stopped))}); no results written"
            )
        outcome.errors = errors
        return outcome
    assert stream is not None
    stream.drain(failed)
    stop = options.decided.get(cell.id) if options.decided is not None else None
    evalset = registry.evalset_of(cell.task_id, cell.split)
    summary = stream.writer.finish(plan.status, evalset, stop)
    outcome.written = True
    totals = summary["totals"]
    outcome.errors = totals["errors"]
    outcome.cost_micro_usd = spend_micro_usd(totals)
    outcome.judge_cost_micro_usd = int(totals.get("judge_cost_micro_usd", 0))
    human = [c.id for c in cell.rubric.criteria if isinstance(c.grader, schema.HumanGrader)]
    outcome.coverage = coverage_counts(totals, human)
    return outcome


@dataclass
class _Bought:
    """Per cell, the requests this run bought for it: a request that several cells send
    is bought for one of them, and the others share its response."""

    candidates: dict[str, list[Job]] = field(default_factory=dict)
    judges: dict[str, list[Job]] = field(default_factory=dict)

    def charge(self, outcome: CellRun, store: ResponseStore) -> None:
        """Set ``outcome``'s cost to what its cell's bought responses cost."""
        cell_id = outcome.plan.status.cell.id
        judges = _cost_of(store, self.judges.get(cell_id, ()))
        outcome.cost_micro_usd = _cost_of(store, self.candidates.get(cell_id, ())) + judges
        outcome.judge_cost_micro_usd = judges


def _cost_of(store: ResponseStore, jobs: Iterable[Job]) -> int:
    """What the stored responses to ``jobs`` cost, each at its pin's price."""
    total = 0
    for job in jobs:
        stored = store.get(job.key)
        if stored is not None:
            completion = Completion.from_record(stored["response"])
            total += cost_micro_usd(job.pin.price, completion)
    return total


def judge_causes(report: FetchReport) -> dict[str, str]:
    """Why each judge request the fetch could not buy has no response, by key (a request
    that shared a failed identical one gets that one's cause)."""
    causes: dict[str, str] = {}
    for error in report.errors:
        if error.kind != "shared_error" or error.key not in causes:
            causes[error.key] = error.cause()
    return causes


class _Budget:
    """Admits requests while their estimated cost keeps the run within --max-cost.

    A candidate request is admitted with the estimated cost of the judge requests its
    response will need (``CellPlan.judge_estimates``): those are then admitted as paid
    for. Other judge requests (for responses from the store) are estimated when asked.
    """

    def __init__(self, max_usd: float | None) -> None:
        self.active = max_usd is not None
        self.limit = round((max_usd or 0.0) * 1_000_000)
        self.committed = 0
        self.output_tokens: dict[str, int | None] = {}
        """Each job's output estimate, as planned (``CellPlan.observed_tokens``)."""
        self.judges: dict[str, int] = {}
        """The judges' estimated cost for each candidate job, by key."""
        self.reserved: set[str] = set()
        """Candidate keys admitted with their judges' cost."""
        self.paid: set[str] = set()
        """Judge keys whose cost was admitted with their candidate request."""

    def cover(self, key: str, judge_jobs: Iterable[Job]) -> None:
        """The judge jobs for the response under ``key``, once it is stored."""
        if key in self.reserved:
            self.paid.update(job.key for job in judge_jobs)

    def admit_batched(self, job: Job) -> bool:
        """``admit`` for a request bought through a batch API, at the batch prices."""
        return self.admit(job, batch=True)

    def admit(self, job: Job, *, batch: bool = False) -> bool:
        if job.key in self.paid:
            return True
        cost = estimate_micro_usd(job.pin, job, self.output_tokens.get(job.key), batch=batch)
        judges = self.judges.get(job.key, 0)
        if self.committed + cost + judges > self.limit:
            return False
        self.committed += cost + judges
        if job.key in self.judges:
            self.reserved.add(job.key)
        return True
