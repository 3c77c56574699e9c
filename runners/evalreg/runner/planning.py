"""What a run is to buy, decided before anything is bought: the cells it touches, their
items, the store key of every request, which of those the store holds already, what the
rest is estimated to cost, and whether a cell can run here at all (its keys set).

``prepare`` plans every cell; a cell may be left to be keyed while the run buys (its
requests come from ``Prepared.requests`` as the fetch asks for them), so that the first
responses are bought before the last requests are keyed.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections import Counter
from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalreg import forked
from evalreg.cells import Cell
from evalreg.errors import BodyError, PromptError
from evalreg.graders.levels import applies
from evalreg.graders.llm_judge import JudgeFailed, Judges
from evalreg.prompting import render_messages
from evalreg.providers import all_providers
from evalreg.providers.attachments import estimated_input_tokens
from evalreg.providers.base import Messages, Provider, credentials_problem, output_cap
from evalreg.providers.batch import batch_api
from evalreg.providers.fetch import Job, Request, make_request
from evalreg.providers.pricing import rates
from evalreg.providers.tools import toolset
from evalreg.registry import schema
from evalreg.registry.loader import Registry, load_registry
from evalreg.results.freshness import CellStatus, status
from evalreg.results.records import SequentialStop
from evalreg.runner._gradepool import Samples
from evalreg.runner.rebuy import LostEvidence, lost_evidence, open_store, rerun
from evalreg.store.batches import BatchJournal
from evalreg.store.keycolumn import KEY_BYTES, KeyColumn
from evalreg.store.segments import ResponseStore

DEFAULT_OUTPUT_TOKENS = 256


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
    until_decided: bool = False
    """Buy every use case's items in rounds and stop once its decision is settled
    (``until_decided``); a use case whose policy has a ``sequential`` block is so bought
    without it."""
    all_items: bool = False
    """Buy every item, even for a use case whose policy says to stop once decided."""
    only: Mapping[str, frozenset[str]] | None = None
    """By cell id, the items of it to run; no other cell is run (a sequential run's
    rounds). Results are written only with ``decided``."""
    decided: Mapping[str, SequentialStop] | None = None
    """With ``only``: write the cells' results on those items, each summary saying where
    the sequential run stopped (its last round)."""
    leave: frozenset[str] = frozenset()
    """Cells this run leaves to a sequential run (every use case reading them is decided
    so); any other cell decided on part of its items is completed."""


def not_sequential(options: RunOptions) -> str | None:
    """The option that keeps a run from buying in rounds, or None."""
    for flag, given in (
        ("--shard", options.shard is not None),
        ("--batch", options.batch),
        ("--limit", options.limit is not None),
        ("--holdout", options.holdout),
        ("--offline", options.offline),
        ("--dry-run", options.dry_run),
    ):
        if given:
            return flag
    return None


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


def key_in_shard(key: str, shard: tuple[int, int] | None) -> bool:
    if shard is None:
        return True
    index, count = shard
    return int(key[:12], 16) % count == index - 1


def keys_in_shard(keys: KeyColumn, shard: tuple[int, int]) -> Any:
    """``key_in_shard`` of each of ``keys``, as one array of booleans: the number the first 12
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
    try:
        return make_request(
            cell.candidate.pin, cell.pin, provider, messages, item.input, toolset(cell.task)
        )
    except BodyError as exc:  # an ``http`` pin's body: a prompt of its own
        what = f"request body of pin {cell.candidate.pin}"
        raise PromptError(cell.id, item.id, exc.at, what, exc.problem) from None


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
        if self.options.only is not None:
            wanted = self.options.only.get(cell.id, frozenset())
            items = [item for item in items if item.id in wanted]
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
                inside = keys_in_shard(keys, shard)
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
        price = cell.pin.price
        per_call = price is not None and not (price.input_per_mtok or price.output_per_mtok)
        if plan.to_buy and per_call and price is not None and price.per_call:
            plan.output_tokens = "priced per call"  # no token price: lengths do not matter
        elif plan.to_buy and not plan.output_tokens:
            cap = _max_output_tokens(plan.to_buy[0])
            plan.output_tokens = f"{cap} output tokens: max_tokens, no history"
        judged = [c for c in cell.rubric.criteria if isinstance(c.grader, schema.MODEL_GRADED)]
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


def _to_run(st: CellStatus, options: RunOptions) -> bool:
    """Whether the run plans the cell (its task and candidate selected): the cells a
    sequential round names; else a stale or pending one, one decided on part of its items
    that no sequential run keeps so, and with ``--force`` a fresh one too."""
    if options.only is not None:
        return st.cell.id in options.only
    if st.cell.id in options.leave:
        return False
    return st.state != "fresh" or options.force or st.decided is not None


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
        if not _to_run(st, options):
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
