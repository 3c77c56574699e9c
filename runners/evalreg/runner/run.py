"""``evalreg run``: reconcile results with the registry by running exactly the stale cells.

All stale cells run concurrently in one process: their missing responses are bought in a
single fetch (the store answers the rest), then each cell is graded and its canonical
results are written. A grader change therefore re-grades without a single request.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
from collections import Counter
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from evalreg import dvcrepo, forked
from evalreg.cells import Cell
from evalreg.graders.levels import applies
from evalreg.graders.llm_judge import JudgeFailed, Judges
from evalreg.prompting import render_messages
from evalreg.providers import all_providers
from evalreg.providers.attachments import estimated_input_tokens
from evalreg.providers.base import (
    Completion,
    Messages,
    Provider,
    credentials_problem,
    output_cap,
)
from evalreg.providers.batch import (
    BATCHED,
    BatchReport,
    batch_api,
    buy_in_batches,
    fits_a_batch,
    live_notes,
)
from evalreg.providers.fetch import FetchReport, Job, Request, fetch, make_request
from evalreg.providers.pricing import cost_micro_usd, rates
from evalreg.providers.tools import toolset
from evalreg.registry import schema
from evalreg.registry.loader import Registry, load_registry
from evalreg.registry.tree import WorkspaceTree
from evalreg.report.numbers import plural
from evalreg.results.freshness import CellStatus, status
from evalreg.results.records import ItemRecord, coverage_counts, spend_micro_usd
from evalreg.results.tally import CellTally
from evalreg.runner import interrupts
from evalreg.runner._cellwriter import CellWriter
from evalreg.runner._dvcworker import Tracker
from evalreg.runner._gradepool import Samples, grade_all
from evalreg.runner.grading import CellGrader, cell_grader
from evalreg.runner.rebuy import LostEvidence, lost_evidence, open_store, rerun
from evalreg.store.batches import BatchJournal
from evalreg.store.journal import Journal, Staged, mark_pushed, unpushed
from evalreg.store.keycolumn import KEY_BYTES, KeyColumn
from evalreg.store.rebought_log import REBOUGHT_LOG, lost_objects, rebought_line
from evalreg.store.rebought_log import read_log as read_rebought
from evalreg.store.segments import STORE_DIR, ResponseStore, SegmentWriter, segment_name

DEFAULT_OUTPUT_TOKENS = 256
_REPORT_EVERY = 1000
"""Graded samples between two progress reports (each costs the display some work)."""


@dataclass(frozen=True)
class RunOptions:
    offline: bool = False
    tasks: tuple[str, ...] = ()
    candidates: tuple[str, ...] = ()
    max_concurrency: int = 64
    limit: int | None = None
    max_cost_usd: float | None = None
    dry_run: bool = False
    shard: tuple[int, int] | None = None
    """(index, count), 1-based index: buy only this shard's responses; write no results."""
    force: bool = False
    """Re-grade fresh cells too (never re-buys a stored response)."""
    push: bool = True
    """Push new store segments and item records to the DVC remote."""
    holdout: bool = False
    """Run the sealed hold-out cells instead of the development cells."""
    strict: bool = False
    """A cell left pending (its key unset, or never run under --offline) fails the run."""
    allow_pending: bool = False
    """A cell left pending because a credential it needs is unset here does not fail the
    run, unless ``tasks`` or ``candidates`` name it (without ``strict``)."""
    batch: bool = False
    """Buy missing responses through the providers' batch APIs where they have one."""
    wait: bool = True
    """With ``batch``: wait for the batches and collect them (else submit and return)."""
    batch_poll_s: float = 15.0
    """The first wait between two polls of a batch (it doubles, up to five minutes)."""


@dataclass
class CellPlan:
    status: CellStatus
    items: Sequence[schema.Item] = ()
    """The cell's items in id order (the first ``--limit`` of them): ``EvalSet.by_id``."""
    keys: KeyColumn = field(default_factory=KeyColumn)
    """The store key of every request, in (item, sample) order (32 bytes each)."""
    to_buy: list[Job] = field(default_factory=list)
    """In-shard requests without a stored response: what this run sends."""
    missing: int = 0
    in_shard: int = 0
    """Jobs this run is responsible for (all of them unless --shard is given)."""
    estimated_micro_usd: int = 0
    blocked: str | None = None
    """Why this cell's missing responses cannot be bought here (a key that is not set,
    its own or a judge's)."""
    unset_key: str | None = None
    """The environment variable whose absence blocks the cell (``credentials`` when a
    credential chain found none), when that is why."""
    output_tokens: str = ""
    """Where the cost estimate's output tokens come from, for ``--dry-run``."""
    observed_tokens: int | None = None
    """Mean output tokens of stored responses of the cell or pin; None without history."""
    judge_requests: int = 0
    """Judge requests the responses to buy will need: one per judge criterion that applies
    to the item, per request to buy (what the judges see is not known before buying)."""
    judge_estimated_micro_usd: int = 0
    judge_estimates: dict[str, int] = field(default_factory=dict)
    """The estimated cost of the judge requests each request to buy needs, by its key."""
    judge_output_tokens: str = ""
    """Where the judge estimate's output tokens come from, for ``--dry-run``."""
    batch_estimated_micro_usd: int | None = None
    """With ``--batch``, for a provider with a batch API: the estimate at batch prices."""

    def samples(self, start: int = 0) -> Samples:
        """(item, sample, key) of every request keyed so far, in (item, sample) order,
        from the ``start``-th on: a view, not a tuple a sample."""
        return Samples(self.items, self.keys, self.status.cell.task.repeats, start)


@dataclass
class CellRun:
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


Progress = Callable[[str, str, int], None]
"""Called with (cell id, outcome, jobs) as jobs finish: cached, fetched, shared or error,
or for judge requests "judge cached", "judge fetched", "judge shared" or "judge error"."""


HISTORY_SAMPLE = 200
"""Stored responses read to learn a cell's output length: enough for a mean, and planning
stays fast however large the store is."""


def observed_output_tokens(store: ResponseStore, keys: Iterable[str]) -> int | None:
    """Mean output (and reasoning) tokens of up to ``HISTORY_SAMPLE`` stored responses
    among ``keys``; None when none is stored."""
    total = count = 0
    for key in keys:
        if key not in store:
            continue
        stored = store.get(key)
        usage = ((stored or {}).get("response") or {}).get("usage") or {}
        total += int(usage.get("output_tokens") or 0) + int(usage.get("reasoning_tokens") or 0)
        count += 1
        if count >= HISTORY_SAMPLE:
            break
    return round(total / count) if count else None


def estimate_micro_usd(
    pin: schema.Pin, job: Job, output_tokens: int | None = None, *, batch: bool = False
) -> int:
    """A cost estimate for one request, before it is sent: ``output_tokens`` is what the
    store has seen for the cell (or pin); without history, the request's ``max_tokens``.
    ``batch``: bought through a batch API, at the pin's batch prices where it has them."""
    if pin.price is None:
        return 0
    if output_tokens is None:
        output_tokens = _max_output_tokens(job)
    return tokens_micro_usd(pin, estimated_input_tokens(job.content), output_tokens, batch=batch)


def tokens_micro_usd(
    pin: schema.Pin, input_tokens: int, output_tokens: int, *, batch: bool = False
) -> int:
    """``estimate_micro_usd`` of a request of ``input_tokens`` answered in
    ``output_tokens``."""
    price = pin.price
    if price is None:
        return 0
    input_price, output_price = rates(price, batch=batch)
    out_price = max(output_price, price.reasoning_per_mtok or 0.0)
    return round(
        input_tokens * input_price + output_tokens * out_price + price.per_call * 1_000_000
    )


def judge_estimate(
    judges: Judges,
    criteria: Sequence[schema.Criterion],
    item: schema.Item,
    output_tokens: int,
    label: str,
    judge_tokens: int | None = None,
) -> tuple[int, int]:
    """(requests, micro-dollars) the judges of ``criteria`` need to grade one response to
    ``item`` that is yet to be bought: each judge prompt rendered with an output of
    ``output_tokens`` (the candidate's estimate), and the judge's own output of
    ``judge_tokens`` (what the cell's stored judge responses average), or without
    history, the judge request's ``max_tokens``."""
    # estimate_micro_usd counts three bytes a token: an output of as many tokens.
    stand_in = "x" * (3 * output_tokens)
    requests = cost = 0
    for criterion in criteria:
        if not applies(criterion, item.tags):
            continue
        try:
            job = judges.job(criterion, item, stand_in, label)
        except JudgeFailed:
            continue  # a prompt that cannot be rendered buys nothing (grading says why)
        requests += 1
        cost += estimate_micro_usd(job.pin, job, judge_tokens)
    return requests, cost


def judge_history(
    judges: Judges,
    criteria: Sequence[schema.Criterion],
    plan: CellPlan,
    store: ResponseStore,
    bought: Container[str] = (),
) -> list[str]:
    """The keys of the judge requests for up to ``HISTORY_SAMPLE`` stored responses of
    the cell (the judge's output length is learnt from those that are stored), leaving
    out the responses under ``bought`` (those this run is buying)."""
    keys: list[str] = []
    read = 0
    for item, sample, key in plan.samples():
        if read >= HISTORY_SAMPLE or len(keys) >= HISTORY_SAMPLE:
            break
        stored = store.get(key) if key in store and key not in bought else None
        if stored is None:
            continue
        read += 1
        label = f"{plan.status.cell.id}/{item.id}#{sample}"
        response = stored["response"]
        calls = response.get("tool_calls") or ()
        for criterion in criteria:
            if applies(criterion, item.tags):
                with contextlib.suppress(JudgeFailed):
                    keys.append(judges.job(criterion, item, response["text"], label, calls).key)
    return keys


def _max_output_tokens(job: Job) -> int:
    return output_cap(job.body) or DEFAULT_OUTPUT_TOKENS


def _in_shard(key: str, shard: tuple[int, int] | None) -> bool:
    if shard is None:
        return True
    index, count = shard
    return int(key[:12], 16) % count == index - 1


def _in_shard_mask(keys: KeyColumn, shard: tuple[int, int]) -> Any:
    """``_in_shard`` of each of ``keys``, as one array of booleans: the number the first 12
    hex digits spell is the first 6 bytes of the key's digest."""
    import numpy as np

    index, count = shard
    digests = np.frombuffer(keys.digests(), dtype=np.uint8).reshape(-1, KEY_BYTES)
    leading = np.zeros((len(digests), 8), dtype=np.uint8)
    leading[:, 2:] = digests[:, :6]
    return leading.view(">u8").ravel() % np.uint64(count) == np.uint64(index - 1)


def cell_request(
    cell: Cell, provider: Provider, item: schema.Item, messages: Messages | None = None
) -> Request:
    """The request a cell sends for ``item`` (the same body for every sample);
    ``messages``: the item's prompt, when already rendered."""
    if messages is None:
        messages = render_messages(cell.task, cell.candidate.prompt, item, cell=cell.id)
    return make_request(
        cell.candidate.pin, cell.pin, provider, messages, item.input, toolset(cell.task)
    )


def _keys(cell: Cell, provider: Provider, items: Sequence[schema.Item]) -> list[str]:
    keys: list[str] = []
    repeats = range(cell.task.repeats)
    for item in items:
        request = cell_request(cell, provider, item)
        keys.extend(request.key(sample) for sample in repeats)
    return keys


Keyed = tuple[int, list[Request] | None, KeyColumn]
"""A run of consecutive items keyed together: the index of the first, the request of each
(None: not kept; the few to buy are made again), and their keys in (item, sample) order."""


def _others(keys: KeyColumn, positions: Sequence[int]) -> Iterator[str]:
    """The keys of ``keys`` at the positions not among ``positions`` (ascending), in
    order: found between them, so that a column all of whose keys are left out is not
    walked key by key."""
    if len(positions) == len(keys):
        return
    begin = 0
    for at in itertools.chain(positions, (len(keys),)):
        for between in range(begin, at):
            yield keys[between]
        begin = at + 1


_CHUNK = 256
"""Items keyed together when each is keyed here, before the store is asked which of their
requests it holds."""


def item_requests(
    cell: Cell,
    provider: Provider,
    items: Sequence[schema.Item],
    store: ResponseStore,
    prompts: list[Messages | None] | None = None,
) -> Iterator[Keyed]:
    """Runs of consecutive ``items``, in order, each with its requests and the store keys
    of their samples (an item read back from its file is read only when it is needed).

    Rendering and hashing 100,000 requests takes a couple of seconds of one core: when
    the store could answer most of them (a replay), ranges of items are keyed in forked
    processes, their requests are not kept, and the cell comes as one run. Otherwise most
    requests are to be bought: each prompt is rendered once, its request kept for the jobs
    (``prompts``: every item's prompt already rendered, each dropped once its request is
    made), and items come a few hundred at a time (the first run is small, so the first
    requests go out soon).
    """
    repeats = cell.task.repeats
    units = len(items) * repeats
    count = forked.parts(units) if prompts is None and len(store) * 2 >= units else 1
    if count >= 2:
        yield 0, None, _forked_keys(cell, provider, items, count)
        return
    first, size = 0, 16
    requests: list[Request] = []
    keys: list[str] = []
    for index, item in enumerate(items):
        messages = None
        if prompts is not None:
            messages, prompts[index] = prompts[index], None
        request = cell_request(cell, provider, item, messages)
        requests.append(request)
        keys.extend(request.key(sample) for sample in range(repeats))
        if len(requests) >= size:
            yield first, requests, KeyColumn(keys)
            first, size, requests, keys = index + 1, _CHUNK, [], []
    if requests:
        yield first, requests, KeyColumn(keys)


def _forked_keys(
    cell: Cell, provider: Provider, items: Sequence[schema.Item], count: int
) -> KeyColumn:
    """The keys of ``items`` in (item, sample) order, made in ``count`` processes."""
    size = -(-len(items) // count)
    pieces = [items[start : start + size] for start in range(0, len(items), size)]
    # A worker's keys come back as their digests, 32 bytes each.
    with forked.forked(
        lambda i: KeyColumn(_keys(cell, provider, pieces[i])).digests(), len(pieces)
    ) as done:
        keys = KeyColumn(_keys(cell, provider, pieces[0]))
        for i in range(1, len(pieces)):
            keys.extend_digests(done(i))
    return keys


def cell_jobs(
    cell: Cell, provider: Provider, items: Iterable[schema.Item]
) -> Iterator[tuple[schema.Item, int, Job]]:
    """Every request of a cell: each item's rendered prompt, once per sample."""
    for item in items:
        request = cell_request(cell, provider, item)
        for sample in range(cell.task.repeats):
            yield item, sample, request.job(sample, f"{cell.id}/{item.id}#{sample}")


def unauthenticated(
    pin_id: str, pin: schema.Pin, provider: Provider, *, judge: bool = False
) -> tuple[str, str] | None:
    """Why ``pin``'s requests cannot be authenticated here (``credentials_problem``, which
    names what to set), and the variable holding its key (``credentials`` for a credential
    chain); or None. A ``judge`` pin is named as one."""
    problem = credentials_problem(provider, pin)
    if problem is None:
        return None
    if judge:
        problem = f"{problem} (judge pin {pin_id})"
    return problem, pin.api_key_env or "credentials"


class _Planner:
    """Plans a run's cells: a cell's items and counts at once (``plan``), its requests
    (keys, the jobs to buy, their estimates) as ``requests`` is iterated."""

    def __init__(
        self, root: Path, options: RunOptions, registry: Registry, store: ResponseStore
    ) -> None:
        self.options, self.registry, self.store = options, registry, store
        self.providers = all_providers(root)
        self.judges = Judges(registry.pins, store)
        self.seen_by_pin: dict[str, list[str]] = {}
        """Keys per pin (any task), from the cells keyed so far: the output length seen
        there is the fallback for a cell of its own that has no stored response yet."""
        self.buying: set[str] = set()
        """The key of every request to buy planned so far. A run buys while it keys its
        later requests: what it bought is in the store then, and was not before."""

    def stored(self, key: str) -> bool:
        """Whether the store held a response under ``key`` before this run bought any."""
        return key in self.store and key not in self.buying

    def _unstored(self, keys: KeyColumn) -> Sequence[int]:
        """The positions of ``keys`` that ``stored`` says no to, ascending: those the store
        lacks, and those it holds because this run bought them."""
        lacking = self.store.absent(keys)
        if not self.buying or len(lacking) == len(keys):
            return lacking
        bought = keys.among(self.buying)
        return sorted(set(lacking).union(bought)) if bought else lacking

    def plan(self, st: CellStatus) -> CellPlan:
        """The cell's items and, unless ``--shard`` picks requests by key, how many
        requests the run is responsible for; nothing keyed yet."""
        cell = st.cell
        plan = CellPlan(st)
        evalset = self.registry.evalset_of(cell.task_id, cell.split)
        items = evalset.by_id
        if self.options.limit is not None:
            items = items[: self.options.limit]
        plan.items = items
        if self.options.shard is None:
            plan.in_shard = len(items) * cell.task.repeats
        return plan

    def requests(
        self, plan: CellPlan, prompts: list[Messages | None] | None = None
    ) -> Iterator[Job]:
        """Key the cell's requests in (item, sample) order, yielding each one to buy as
        it is made; then estimate what they cost, and whether the cell can run.
        ``prompts``: its items' prompts, already rendered."""
        cell = plan.status.cell
        provider = self.providers[cell.pin.provider]
        shard = self.options.shard
        for_items: list[schema.Item] = []
        """The item of each job to buy."""
        sizes: Counter[tuple[int, int]] = Counter()
        """(input tokens, max_tokens) of the jobs to buy: what their estimates depend on,
        counted as they are made (the output length seen is known once all are)."""
        history: list[str] = []
        """The first ``HISTORY_SAMPLE`` keys ``stored`` says yes to: the cell's output
        length is learnt from their responses."""
        repeats = cell.task.repeats
        made: tuple[int, Request] | None = None
        """The last request made again (``item_requests`` kept none), with its item's index."""
        for first, requests, keys in item_requests(cell, provider, plan.items, self.store, prompts):
            # Keyed before its requests are bought: grading waits for what is not stored.
            plan.keys.extend_column(keys)
            # The store is asked about the run's keys at once, and only the samples it
            # lacks (or that this run buys) are walked: none, in a replay.
            todo = self._unstored(keys)
            if len(history) < HISTORY_SAMPLE:
                history.extend(itertools.islice(_others(keys, todo), HISTORY_SAMPLE - len(history)))
            if shard is not None:
                inside = _in_shard_mask(keys, shard)
                plan.in_shard += int(inside.sum())
                todo = [at for at in todo if inside[at]]
            for at in todo:
                index, sample = first + at // repeats, at % repeats
                key, item = keys[at], plan.items[index]
                if requests is not None:
                    request = requests[index - first]
                elif made is not None and made[0] == index:
                    request = made[1]
                else:
                    request = cell_request(cell, provider, item)
                    made = (index, request)
                job = request.job(sample, f"{cell.id}/{item.id}#{sample}", key)
                plan.to_buy.append(job)
                for_items.append(item)
                sizes[estimated_input_tokens(job.content), _max_output_tokens(job)] += 1
                plan.missing += 1
                self.buying.add(key)
                yield job
        self._estimate(plan, for_items, sizes, history)
        if plan.missing and not self.options.offline:
            # Its judges too: responses that no judge here can grade leave the cell
            # unwritten, so none are bought for it, as for a cell whose own key is unset.
            found = self.unauthenticated(cell, judges=plan.judge_requests > 0)
            if found is not None:
                plan.blocked, plan.unset_key = found
        elif (
            self.options.offline
            and plan.status.state == "pending"
            and plan.missing == plan.in_shard
        ):
            plan.blocked = "never run, and --offline buys nothing"

    def unauthenticated(self, cell: Cell, *, judges: bool = True) -> tuple[str, str] | None:
        """``unauthenticated`` for the first pin the cell calls that cannot be
        authenticated here: its own, then (with ``judges``) each of its judges; or None."""
        for pin_id in (cell.candidate.pin, *(cell.judges if judges else ())):
            pin = self.registry.pins[pin_id]
            judge = pin_id != cell.candidate.pin
            found = unauthenticated(pin_id, pin, self.providers[pin.provider], judge=judge)
            if found is not None:
                return found
        return None

    def key(self, plan: CellPlan) -> None:
        """Key the cell's requests now."""
        for _ in self.requests(plan):
            pass

    def _estimate(
        self,
        plan: CellPlan,
        for_items: list[schema.Item],
        sizes: Counter[tuple[int, int]],
        history: list[str],
    ) -> None:
        """The estimated cost of the cell's requests to buy (``for_items``: the item of
        each; ``sizes``: how many have each input length and ``max_tokens``), from the
        output lengths of what the store held before this run (``history``: the first
        of the cell's keys it held)."""
        cell = plan.status.cell
        store = self.store
        pin_keys = self.seen_by_pin.setdefault(cell.candidate.pin, [])
        observed = observed_output_tokens(store, history)
        if observed is not None:
            plan.output_tokens = f"{observed} output tokens: mean of stored responses of the cell"
        else:
            observed = observed_output_tokens(store, filter(self.stored, pin_keys))
            if observed is not None:
                plan.output_tokens = (
                    f"{observed} output tokens: mean of stored responses of the pin"
                )
        pin_keys.extend(plan.keys[: HISTORY_SAMPLE * 4])
        plan.observed_tokens = observed
        if self.options.batch and batch_api(cell.pin) is not None:
            plan.batch_estimated_micro_usd = 0
        for (input_tokens, cap), count in sizes.items():
            output_tokens = cap if observed is None else observed
            plan.estimated_micro_usd += count * tokens_micro_usd(
                cell.pin, input_tokens, output_tokens
            )
            if plan.batch_estimated_micro_usd is not None:
                plan.batch_estimated_micro_usd += count * tokens_micro_usd(
                    cell.pin, input_tokens, output_tokens, batch=True
                )
        if plan.to_buy and not plan.output_tokens:
            cap = _max_output_tokens(plan.to_buy[0])
            plan.output_tokens = f"{cap} output tokens: max_tokens, no history"
        judged = [c for c in cell.rubric.criteria if isinstance(c.grader, schema.JudgeGrader)]
        if not judged:
            return
        judging: tuple[schema.Item, tuple[int, int]] | None = None
        judge_tokens: int | None = None
        for job, item in zip(plan.to_buy, for_items, strict=True):
            if not plan.judge_output_tokens:
                history = judge_history(self.judges, judged, plan, store, self.buying)
                judge_tokens = observed_output_tokens(store, history)
                plan.judge_output_tokens = (
                    "max_tokens of the judge request, no history"
                    if judge_tokens is None
                    else f"{judge_tokens} output tokens: mean of stored judge responses of the cell"
                )
            if judging is None or judging[0] is not item:
                tokens = _max_output_tokens(job) if observed is None else observed
                label = f"{cell.id}/{item.id}"
                judging = (
                    item,
                    judge_estimate(self.judges, judged, item, tokens, label, judge_tokens),
                )
            count, cost = judging[1]
            plan.judge_requests += count
            plan.judge_estimated_micro_usd += cost
            plan.judge_estimates[job.key] = cost


def _buys_while_planning(root: Path, options: RunOptions) -> bool:
    """Whether the run may buy its first responses before its cells are keyed: not when
    something needs every key first. A dry run shows the whole plan; ``--max-cost``
    admits requests by estimates learnt from a cell's stored responses; ``--batch``, and
    batches still waiting, sort the requests into live and batched ones; ``--shard``
    counts its share of the requests for the progress display; ``--offline`` buys
    nothing."""
    if options.dry_run or options.offline or options.batch or options.shard is not None:
        return False
    return options.max_cost_usd is None and not BatchJournal.load(root).batches


@dataclass(frozen=True)
class Prepared:
    """What a run works from: every cell it touches, planned before anything is bought,
    but for the requests of the cells in ``unkeyed``."""

    registry: Registry
    store: ResponseStore
    plans: list[CellPlan]
    """Every cell the run touches, in the order of ``status``."""
    unkeyed: dict[str, Iterator[Job]] = field(default_factory=dict)
    """By cell id, the requests of a cell still to be keyed: iterating them keys the
    cell (in plan order: a cell learns its output length from the cells before it) and
    completes its plan."""
    lost: LostEvidence = field(default_factory=LostEvidence)
    """Objects no copy holds, and the cells run again because their results rest on them."""

    def requests(self, plan: CellPlan) -> Iterator[Job]:
        """The cell's requests to buy, keyed as they are asked for if they are not yet."""
        unkeyed = self.unkeyed.pop(plan.status.cell.id, None)
        return iter(plan.to_buy) if unkeyed is None else unkeyed

    def complete(self) -> None:
        """Key every cell still to be keyed: each plan is whole after this."""
        for plan in self.plans:
            for _ in self.requests(plan):
                pass


def prepare(
    root: Path, options: RunOptions, registry: Registry | None = None, *, keyed: bool = True
) -> Prepared:
    """Load the registry (unless given) and the store, and plan every cell this run will
    touch.

    ``keyed=False``: where the run may buy while it plans (``_buys_while_planning``), a
    cell whose pin can be called is left for ``Prepared.requests`` to key: its plan holds
    what a progress display needs (items, how many requests), and every prompt of it is
    rendered now, so that one that cannot be is refused before anything is bought.
    """
    if registry is None:
        registry = load_registry(root)
    store, lost_segments = open_store(root)
    planner = _Planner(root, options, registry, store)
    defer = not keyed and _buys_while_planning(root, options)
    plans = []
    unkeyed: dict[str, Iterator[Job]] = {}
    statuses = status(registry, split="holdout" if options.holdout else "dev")
    lost = lost_evidence(root, statuses, store, lost_segments)
    for st in map(functools.partial(rerun, lost=lost), statuses):
        cell = st.cell
        if options.tasks and cell.task_id not in options.tasks:
            continue
        if options.candidates and cell.candidate.id not in options.candidates:
            continue
        if st.state == "fresh" and not options.force:
            continue
        plan = planner.plan(st)
        # A pin that cannot be called (the cell's or a judge's) blocks its cell only if it
        # has anything to buy: that takes its keys.
        if defer and planner.unauthenticated(cell) is None:
            prompts: list[Messages | None] = [
                render_messages(cell.task, cell.candidate.prompt, item, cell=cell.id)
                for item in plan.items
            ]
            unkeyed[cell.id] = planner.requests(plan, prompts)
        else:
            planner.key(plan)
        plans.append(plan)
    return Prepared(registry, store, plans, unkeyed, lost)


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
    budget = _Budget(options.max_cost_usd)
    if budget.active:
        # Planned whole: every request is admitted by the estimates of the whole plan.
        budget.output_tokens = {j.key: p.observed_tokens for p in runnable for j in p.to_buy}
        budget.judges = {k: v for p in runnable for k, v in p.judge_estimates.items()}
    cell_of: dict[int, str] = {}
    """The cell of each job, by ``id``: cells may send the same request (one key), and
    each counts its own job, bought, shared or from the store."""
    bought = _Bought()

    def to_buy() -> Iterator[Job]:
        """The requests to buy, cell after cell, keyed as the fetch asks for them: the
        first are bought while later ones are still being keyed."""
        for plan in runnable:
            cell_id = plan.status.cell.id
            for job in planned.requests(plan):
                cell_of[id(job)] = cell_id
                yield job
            # Stored responses were found while keying: count them, don't fetch them.
            cached = plan.in_shard - len(plan.to_buy)
            if progress is not None and cached:
                progress(cell_id, "cached", cached)

    graders = {
        p.status.cell.id: cell_grader(p.status.cell, registry, store, root) for p in runnable
    }
    journal = Journal.begin(root, push=options.push) if runnable else None
    cleanup = contextlib.ExitStack()

    def stream_of(plan: CellPlan) -> _CellStream:
        assert journal is not None
        cell_id = plan.status.cell.id
        return cleanup.enter_context(
            _CellStream(root, plan, graders[cell_id], store, journal.tmp_name, progress)
        )

    streams = {p.status.cell.id: stream_of(p) for p in runnable if _streams(p, options)}

    def on_job(job: Job, outcome: str) -> None:
        cell_id = cell_of.get(id(job), "?")
        if outcome == "fetched":
            bought.candidates.setdefault(cell_id, []).append(job)
        if progress is not None:
            progress(cell_id, outcome, 1)
        if outcome != "error" and cell_id in streams:
            streams[cell_id].advance()

    judge_keys: dict[str, set[str]] = {}
    judge_cell: dict[int, str] = {}
    """The cell of each judge job, by ``id``: cells may send the same judge request."""

    def judge_jobs() -> list[Job]:
        """Judge requests for every graded output of this run (after phase one)."""
        out = []
        for plan in runnable:
            cell_id = plan.status.cell.id
            grader = graders[cell_id]
            if not _judged(plan.status.cell):
                continue
            mine = judge_keys.setdefault(cell_id, set())
            needed: list[Job] = []
            for item, sample, key in plan.samples():
                stored = store.get(key) if _in_shard(key, options.shard) else None
                if stored is not None:
                    jobs = grader.judge_jobs(item, sample, stored)
                    mine.update(job.key for job in jobs)
                    budget.cover(key, jobs)
                    needed.extend(jobs)
            blocked = None if options.offline else _unauthenticated_judge(needed, store)
            if blocked is not None:
                # Its responses were all stored before (a cell with any to buy is asked
                # while planning): it is left as it was, as a cell whose own key is unset.
                plan.blocked, plan.unset_key = blocked
                continue
            for job in needed:
                judge_cell[id(job)] = cell_id
            out.extend(needed)
        return out

    def on_judge_job(job: Job, outcome: str) -> None:
        cell_id = judge_cell.get(id(job), "?")
        if outcome == "fetched":
            bought.judges.setdefault(cell_id, []).append(job)
        if progress is not None:
            progress(cell_id, f"judge {outcome}", 1)

    writers: list[SegmentWriter] = []
    providers = all_providers(root)

    async def go() -> tuple[FetchReport, FetchReport | None]:
        label = f"shard{options.shard[0]}of{options.shard[1]}" if options.shard else "run"
        layer = None
        if not options.offline:
            # Offline nothing is sent and no batch is asked about: neither the HTTP layer
            # nor httpx is even imported.
            from evalreg.providers.http import HttpLayer

            network = registry.settings.network
            layer = HttpLayer(ca_bundle=network.ca_bundle, root=root)
        async with layer or contextlib.nullcontext() as http:
            writer = None
            if not options.offline:
                # Listed before it exists: a run stopped in between leaves no segment that
                # its journal does not name, and a reader never sees it as nobody's.
                name = segment_name(label)
                assert journal is not None
                journal.add_segment(f"{STORE_DIR}/{name}")
                writer = SegmentWriter(root, name=name)
                writers.append(writer)
            try:
                live, batched = _by_batch(to_buy(), options, root)
                report = await fetch(
                    live,
                    store,
                    writer,
                    http,
                    offline=options.offline,
                    concurrency=options.max_concurrency,
                    progress=on_job,
                    admit=budget.admit if budget.active else None,
                )
                if batched is not None:
                    assert http is not None
                    pins = {
                        pin_id: (pin, providers[pin.provider])
                        for pin_id, pin in registry.pins.items()
                        if credentials_problem(providers[pin.provider], pin) is None
                    }
                    in_batches, result.batches = await buy_in_batches(
                        batched[1],
                        store,
                        writer,
                        http,
                        batched[0],
                        pins,
                        submit=options.batch,
                        wait=options.batch and options.wait,
                        poll_s=options.batch_poll_s,
                        progress=on_job,
                        admit=budget.admit_batched if budget.active else None,
                    )
                    _merge(report, in_batches)
                stored = sum(p.in_shard - len(p.to_buy) for p in runnable)
                report.total += stored
                report.cached += stored
                judged = judge_jobs()
                second = (
                    await fetch(
                        judged,
                        store,
                        writer,
                        http,
                        offline=options.offline,
                        concurrency=options.max_concurrency,
                        progress=on_judge_job,
                        admit=budget.admit if budget.active else None,
                    )
                    if judged
                    else None
                )
                return report, second
            finally:
                if writer is not None:
                    writer.close()

    with cleanup:
        # DVC gets ready in a child process while this one fetches and grades.
        if tracker is None and runnable:
            tracker = cleanup.enter_context(Tracker(root))
        try:
            report, result.judge_fetch = asyncio.run(go()) if runnable else (FetchReport(), None)
        except KeyboardInterrupt as exc:
            raise RunInterrupted(sum(w.written for w in writers)) from exc
        result.fetch = report
        failed = {e.key: e.kind for e in report.errors}
        if result.batches is not None:
            failed.update(dict.fromkeys(result.batches.waiting, BATCHED))
        if result.judge_fetch is not None:
            causes = judge_causes(result.judge_fetch)
            for grader in graders.values():
                if grader.judges is not None:
                    grader.judges.failed.update(causes)
        staged: list[tuple[Staged, Staged]] = []
        for plan in plans:
            cell_id = plan.status.cell.id
            stream = streams.get(cell_id)
            if stream is None and cell_id in graders:
                stream = stream_of(plan)
            outcome = _finish(registry, plan, failed, options, stream)
            if not outcome.written:
                # No summary to read it from (--shard, --limit, or responses missing).
                bought.charge(outcome, store)
            result.outcomes.append(outcome)
            if outcome.written and stream is not None and stream.writer.staged is not None:
                staged.append(stream.writer.staged)
        tracked: list[str] = []
        results: list[str] = []
        if journal is not None:
            assert tracker is not None
            metrics: list[Staged] = []
            if staged:
                summaries = {s.path: (root / s.tmp).read_bytes() for _, s in staged}
                for rel, data in metrics_updates(root, registry, summaries):
                    metrics.append(Staged(journal.tmp_name(rel), rel))
                    (root / rel).parent.mkdir(parents=True, exist_ok=True)
                    (root / metrics[-1].tmp).write_bytes(data)
            index = metrics_index(root, registry, {s.path for s in metrics}) if staged else None
            rebought = _rebought(root, planned.lost, result.outcomes, journal)
            metrics += rebought
            written = [o.plan for o in result.outcomes if o.written]
            for rel in _untracked_segments_used(root, store, written, judge_keys):
                if rel not in journal.segments:
                    journal.segments.append(rel)

            def track(paths: list[str]) -> None:
                assert tracker is not None
                tracker.add(paths)
                if not options.push:
                    # Nothing follows the add: the child exits while results go in place.
                    tracker.release()

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
        results += _forget_lost_segments(root, planned.lost, result.outcomes)
        owed = unpushed(root) if options.push else []
        if owed:
            result.push_error = (
                tracker.push(owed) if tracker is not None else _push_here(root, owed)
            )
            if result.push_error is None:
                # Staged before the push is marked done: a kill in between leaves the push
                # owed, and the next run's push (a no-op) stages them.
                result.objects = dvcrepo.stage_objects(root, owed)
                mark_pushed(root, owed)
                result.pushed = owed
        result.to_commit = dvcrepo.to_commit(root, tracked, [*results, *result.objects.staged])
    return result


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


def _merge(report: FetchReport, other: FetchReport) -> None:
    report.total += other.total
    report.cached += other.cached
    report.fetched += other.fetched
    report.shared += other.shared
    report.errors.extend(other.errors)


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
    return options.shard is None and options.limit is None and not _judged(plan.status.cell)


def _judged(cell: Cell) -> bool:
    """Whether a criterion of the cell is graded by a judge model."""
    return any(isinstance(c.grader, schema.JudgeGrader) for c in cell.rubric.criteria)


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
    inside = None if options.shard is None or not lacking else _in_shard_mask(keys, options.shard)
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
    partial = options.shard is not None or options.limit is not None
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
    summary = stream.writer.finish(plan.status, registry.evalset_of(cell.task_id, cell.split))
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


def metrics_updates(
    root: Path, registry: Registry, written: dict[str, bytes]
) -> list[tuple[str, bytes]]:
    """The DVC metrics files to write, as (path, content): each cell's whose summary is
    ``written`` now (summary path → its bytes) or on disk, where the file is missing or is
    not its summary's (written by an older evalreg, or taken from one side of a merge)."""
    from evalreg.cells import cells
    from evalreg.errors import RegistryError
    from evalreg.results.dvc_metrics import metrics_bytes
    from evalreg.results.records import read_summary, summary_from_bytes

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
    from evalreg.cells import cells

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
