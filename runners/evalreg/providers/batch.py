"""Buy responses through batch APIs: OpenAI's Batch API, Anthropic's Message Batches and
the Gemini API's batch mode.

A batch holds the exact request bodies a live run would send, each under its store key (as
``custom_id``, or a Gemini request's ``metadata.key``): a response bought in a batch is
stored under the same key, as the same evidence, as one bought live; its record says
``"batch": true`` (priced at the pin's batch prices) and names the batch. Every step is
journalled before the next call (``store.batches``), so a run stopped at any moment
resumes: it finds the batches it submitted, polls them, and collects what they bought
instead of buying it again.

OpenAI: the requests are uploaded as a JSONL file (``POST /v1/files``, purpose ``batch``),
the batch created from it (``POST /v1/batches``, ``completion_window: 24h``), polled
(``GET /v1/batches/{id}``) and its output and error files read
(``GET /v1/files/{id}/content``). Anthropic: the batch is created with its requests
(``POST /v1/messages/batches``), polled (``GET /v1/messages/batches/{id}``) and its
``results_url`` read (JSONL). Gemini API: the batch is created with its requests inlined
(``POST {base}/v1beta/models/{model}:batchGenerateContent``, body ``{"batch":
{"display_name", "input_config": {"requests": {"requests": [{"request", "metadata":
{"key"}}]}}}}``), the long-running operation it answers (``name: batches/...``) polled
(``GET {base}/v1beta/{name}``: ``metadata.state`` ``BATCH_STATE_PENDING``, ``RUNNING``,
``SUCCEEDED``, ``FAILED``, ``CANCELLED`` or ``EXPIRED``), and its
``response.inlinedResponses.inlinedResponses`` read, each with ``response`` or ``error``
(a ``google.rpc.Status``) and the ``metadata`` its request was given. This follows Google's
Batch API guide (ai.google.dev/gemini-api/docs/batch-api: inline requests, the REST
examples, "keep the total request size under 20MB", "the creation of a batch job is not
idempotent") and reference (ai.google.dev/api/batch-api: ``InlinedRequest``,
``InlinedResponse``, ``batches.get``, ``batches.list`` answering ``operations`` and
``nextPageToken``), and the ``@google/genai`` SDK's converters, which read the state and
output from the operation's ``metadata`` and map ``BATCH_STATE_*`` to ``JOB_STATE_*``
(both are accepted here). Each response is matched to its request by the ``metadata.key``
it echoes (the store key); the reference also promises the responses come in the order of
the requests, which is used only for a response without that key. Vertex AI's batch
prediction reads its input from Cloud Storage or BigQuery, not inline: Vertex AI pins are
bought live.

A request that errored or expired inside a batch is an error for its item, like any
provider error: it is not stored, and the next run buys it again.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from evalreg.providers.base import Completion, Provider, ProviderError
from evalreg.providers.fetch import FetchReport, Job, JobError, put_response
from evalreg.registry.schema import Limits, Pin
from evalreg.store.batches import (
    INTENT,
    SUBMITTED,
    UPLOADED,
    Batch,
    BatchJournal,
    BatchRequest,
)
from evalreg.store.segments import ResponseStore, SegmentWriter, load_json

if TYPE_CHECKING:
    from evalreg.providers.http import HttpLayer

APIS = {
    "openai": "openai",
    "openai_responses": "openai",
    "anthropic": "anthropic",
    "gemini": "gemini",
}
"""The batch API of each provider that has one (others are bought live)."""
MAX_REQUESTS = {"openai": 50_000, "anthropic": 100_000, "gemini": 100_000}
"""Requests one batch may hold (Gemini documents no count for inline requests: its byte
limit binds first)."""
MAX_BYTES = {"openai": 190 << 20, "anthropic": 250 << 20, "gemini": 18 << 20}
"""Bytes one batch's requests may take (a margin under the APIs' 200 MB and 256 MB, and
the 20 MB Gemini takes inline in one creation request)."""
_WRAPPING = 200
"""Bytes a batch may add around each request (its custom id or key, its JSON wrapping)."""
MAX_POLL_S = 300.0
CLOCK_SKEW_S = 600.0
"""How far the provider's clock may be behind ours when a run looks for a batch whose
creation's answer was lost among those created since it journalled its intent."""
Created = tuple[str, str | None]
"""A created batch: its id, and when it expires (None if not said)."""
_OPENAI_ENDED = frozenset({"completed", "failed", "expired", "cancelled"})
_OPENAI_SUFFIXES = ("/chat/completions", "/responses")
_GEMINI_SUFFIX = ":generateContent"
_GEMINI_ENDED = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED"})
_GRPC_HTTP = {
    1: 499,  # CANCELLED
    2: 500,  # UNKNOWN
    3: 400,  # INVALID_ARGUMENT
    4: 504,  # DEADLINE_EXCEEDED
    5: 404,  # NOT_FOUND
    7: 403,  # PERMISSION_DENIED
    8: 429,  # RESOURCE_EXHAUSTED
    9: 400,  # FAILED_PRECONDITION
    13: 500,  # INTERNAL
    14: 503,  # UNAVAILABLE
    16: 401,  # UNAUTHENTICATED
}
"""The HTTP status of a ``google.rpc.Status`` code, as Google's APIs map them."""
_VERTEX_LIVE = (
    "bought live: Vertex AI batch prediction reads its requests from Cloud Storage or "
    "BigQuery, not inline; the Gemini API (an API key) batches them"
)

_UNKNOWN_OUTCOME = frozenset({"timeout", "connection", "server", "malformed", "unreachable"})
"""Errors after which a batch may or may not have been created."""

BATCHED = "batched"
"""Why a request has no response yet: it waits in a submitted batch (a later run collects
it; not an error)."""


def batch_api(pin: Pin) -> str | None:
    """The batch API ``pin``'s requests can be bought through, or None (bought live)."""
    if pin.provider == "gemini" and pin.vertex is not None:
        return None
    return APIS.get(pin.provider)


def fits_a_batch(job: Job) -> bool:
    """Whether ``job``'s request alone fits in one batch of its API (a larger one, say a
    request carrying big files, is bought live)."""
    api = batch_api(job.pin)
    return api is not None and len(job.content) + _WRAPPING <= MAX_BYTES[api]


def live_notes(pins: Mapping[str, Pin]) -> list[str]:
    """Why the requests of ``pins`` (by id) that have no batch API are bought live."""
    named = sorted({p.provider for p in pins.values() if p.provider not in APIS})
    vertex = sorted(i for i, p in pins.items() if p.provider in APIS and batch_api(p) is None)
    notes = []
    if named:
        notes.append(f"bought live, without a batch API here: {', '.join(named)} requests")
    if vertex:
        notes.append(f"{', '.join(vertex)} (Vertex AI): {_VERTEX_LIVE}")
    return notes


@dataclass
class BatchReport:
    """What the batch APIs did in one run."""

    submitted: list[str] = field(default_factory=list)
    """Provider batch ids this run submitted."""
    waiting: set[str] = field(default_factory=set)
    """Keys of this run's requests still in batches that have not ended (not errors: a
    later run collects them)."""
    notes: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    """Batches this run could not submit, poll or read (kept journalled; the run fails)."""


Progress = Callable[[Job, str], None]


@dataclass(frozen=True)
class _Pinned:
    pin_id: str
    pin: Pin
    provider: Provider


async def buy_in_batches(
    jobs: Iterable[Job],
    store: ResponseStore,
    writer: SegmentWriter | None,
    http: HttpLayer,
    journal: BatchJournal,
    pins: Mapping[str, tuple[Pin, Provider]],
    *,
    submit: bool,
    wait: bool,
    poll_s: float,
    progress: Progress | None = None,
    admit: Callable[[Job], bool] | None = None,
) -> tuple[FetchReport, BatchReport]:
    """Make sure every job's response is stored or waiting in a journalled batch.

    Journalled batches are finished first (a submission a stopped run left half done) and
    polled once; ``submit`` puts the jobs that no batch holds into new batches (without it
    they are left to the caller, who buys them live); ``wait`` polls until every batch
    holding one of ``jobs`` has ended (waiting ``poll_s``, doubling up to
    ``MAX_POLL_S``) and collects it. ``pins`` are the registry's pins and their
    providers, by id: a journalled batch of a pin not there is left for a run that has it.
    """
    report, batches = FetchReport(), BatchReport()
    mine = {job.key: job for job in jobs}
    report.total = len(mine)
    known = {id_: _Pinned(id_, *pair) for id_, pair in pins.items()}
    errors: dict[str, ProviderError] = {}
    done: set[str] = set()

    def collected(key: str, outcome: ProviderError | None) -> None:
        job = mine.get(key)
        if key in done or job is None:
            return
        done.add(key)
        if outcome is None:
            report.fetched += 1
        else:
            errors[key] = outcome
        if progress is not None:
            progress(job, "fetched" if outcome is None else "error")

    stuck: set[str] = set()
    """Journalled batches this run could not resume or poll (left for a later run)."""

    def unreachable(batch: Batch, exc: ProviderError) -> None:
        """A batch this run cannot take further: its requests stay waiting in it."""
        stuck.add(batch.local_id)
        batches.failures.append(
            f"{batch.pin_id}: batch {batch.batch_id or batch.local_id} "
            f"({len(batch.keys)} requests) is kept for a later run: {exc.summary()}"
        )

    for batch in list(journal.batches):
        if batch.state != SUBMITTED and batch.pin_id in known:
            try:
                await _submit(batch, journal, http, known[batch.pin_id], batches, resumed=True)
            except ProviderError as exc:
                unreachable(batch, exc)

    async def poll() -> None:
        await _poll_round(journal, store, writer, http, known, stuck, collected, unreachable)

    await poll()

    if submit:
        pending = journal.pending_keys()
        fresh = [job for key, job in mine.items() if key not in store and key not in pending]
        admitted = []
        for job in fresh:
            if admit is not None and not admit(job):
                collected(
                    job.key,
                    ProviderError("budget", "not sent: the --max-cost budget would be exceeded"),
                )
            else:
                admitted.append(job)
        for group in _groups(admitted):
            first = group[0]
            api = APIS[first.provider.name]
            requests = [BatchRequest(j.key, j.sample, j.content) for j in group]
            batch = journal.begin(api, first.provider.name, first.pin_id, first.endpoint, requests)
            try:
                await _submit(batch, journal, http, known[first.pin_id], batches, resumed=False)
            except ProviderError as exc:
                if exc.kind in _UNKNOWN_OUTCOME:
                    # It may have been created: kept, so the next run finds it or says so.
                    unreachable(batch, exc)
                    continue
                # Refused: nothing was bought, and its requests are free to go again.
                journal.remove([batch])
                for job in group:
                    collected(job.key, exc)

    delay = poll_s
    while wait and _holding(journal, mine, stuck):
        await asyncio.sleep(delay)
        delay = min(delay * 2, max(MAX_POLL_S, poll_s))
        await poll()

    held = journal.pending_keys()
    for key, job in mine.items():
        if key in done and key not in errors:
            continue
        if key in store:
            if key not in done:
                report.cached += 1
                if progress is not None:
                    progress(job, "cached")
            continue
        error = errors.get(key)
        if error is None and key in held:
            batches.waiting.add(key)
            continue
        if error is None:
            error = ProviderError("batch_missing", "not bought: no batch holds it")
        report.errors.append(
            JobError(
                job.label, key, job.pin_id, error.kind, error.status, str(error), error.attempts
            )
        )
    return report, batches


def _holding(journal: BatchJournal, mine: Mapping[str, Job], stuck: set[str]) -> bool:
    """Whether a batch this run can poll holds one of its requests."""
    return any(
        key in mine
        for batch in journal.batches
        if batch.local_id not in stuck
        for key in batch.keys
    )


def _groups(jobs: list[Job]) -> list[list[Job]]:
    """Jobs split into batches: one pin and endpoint a batch, within the API's limits."""
    by: dict[tuple[str, str], list[Job]] = {}
    for job in jobs:
        by.setdefault((job.pin_id, job.endpoint), []).append(job)
    out = []
    for group in by.values():
        api = APIS[group[0].provider.name]
        current: list[Job] = []
        size = 0
        for job in group:
            if current and (
                len(current) >= MAX_REQUESTS[api] or size + len(job.content) > MAX_BYTES[api]
            ):
                out.append(current)
                current, size = [], 0
            current.append(job)
            size += len(job.content) + _WRAPPING
        if current:
            out.append(current)
    return out


# ---------------------------------------------------------------- submitting
async def _submit(
    batch: Batch,
    journal: BatchJournal,
    http: HttpLayer,
    pinned: _Pinned,
    report: BatchReport,
    *,
    resumed: bool,
) -> None:
    """Take ``batch`` from its journalled step to ``submitted``."""
    requests = list(journal.requests(batch))
    if batch.api == "openai":
        api = _OpenAI(http, pinned, batch.endpoint)
        found = None
        if batch.state == INTENT:
            file_id = await api.upload(batch.local_id, requests)
            journal.update(batch, state=UPLOADED, file_id=file_id)
        else:
            # Uploaded by a run that stopped before it journalled the batch it created:
            # a batch made from this file is that one.
            assert batch.file_id is not None
            found = await api.find(batch.file_id)
        assert batch.file_id is not None
        created = found or await api.create(batch.file_id, batch.local_id)
    elif batch.api == "gemini":
        gemini = _Gemini(http, pinned, batch)
        found = await gemini.find() if resumed else None
        if resumed:
            report.notes.append(
                f"{batch.pin_id}: a run stopped while submitting a batch of "
                f"{len(requests)} requests; "
                + (
                    f"the Gemini API has it ({found[0]}, named {gemini.name}): it is collected"
                    if found is not None
                    else f"no batch named {gemini.name} is among the account's batches, so "
                    "they are submitted now"
                )
            )
        created = found or await gemini.create(requests)
    else:
        anthropic = _Anthropic(http, pinned, batch.endpoint)
        found = None
        if resumed:
            taken = {b.batch_id for b in journal.batches if b.batch_id is not None}
            found, candidates = await anthropic.find(batch, len(requests), taken)
            stopped = (
                f"{batch.pin_id}: a run stopped while submitting a batch of "
                f"{len(requests)} requests, before Anthropic answered; "
            )
            if found is not None:
                said = f"{found[0]}, created since, holds that many: it is collected"
            elif candidates:
                said = (
                    f"{candidates} batches created since hold that many, so which is its "
                    "own is unknown: they are submitted again (if one of those was it, "
                    "its requests are bought twice, at the batch price)"
                )
            else:
                said = "no batch created since holds that many: they are submitted now"
            report.notes.append(stopped + said)
        created = found or await anthropic.create(batch, requests)
    batch_id, expires = created
    journal.update(batch, state=SUBMITTED, batch_id=batch_id, expires_utc=expires)
    report.submitted.append(batch_id)


# ---------------------------------------------------------------- polling, collecting
Collected = Callable[[str, ProviderError | None], None]
Results = tuple[dict[str, Completion | ProviderError], ProviderError | None]
"""Each request's outcome by key, and the error of a request the batch has no line for
(it expired or failed before running it; None when every request should have a line)."""


async def _poll_round(
    journal: BatchJournal,
    store: ResponseStore,
    writer: SegmentWriter | None,
    http: HttpLayer,
    known: Mapping[str, _Pinned],
    stuck: set[str],
    collected: Collected,
    unreachable: Callable[[Batch, ProviderError], None],
) -> None:
    """Ask once after every submitted batch; collect those that have ended."""
    ended: list[Batch] = []
    for batch in list(journal.batches):
        pinned = known.get(batch.pin_id)
        if (
            batch.state != SUBMITTED
            or pinned is None
            or batch.batch_id is None
            or batch.local_id in stuck
        ):
            continue
        results: Results | None
        try:
            results = await _api(http, pinned, batch).results(batch.batch_id)
        except ProviderError as exc:
            if exc.status != 404:
                unreachable(batch, exc)
                continue
            # The provider no longer knows it: its requests are errors, bought again.
            results = {}, exc
        if results is None:
            continue
        outcomes, otherwise = results
        missing = otherwise or ProviderError(
            "batch_missing", f"batch {batch.batch_id} ended without a result for it"
        )
        requests = {r.key: r for r in journal.requests(batch)}
        for key in batch.keys:
            outcome = outcomes.get(key, missing)
            request = requests[key]
            if isinstance(outcome, Completion):
                if key not in store:
                    try:
                        put_response(
                            store,
                            writer,
                            key,
                            batch.provider,
                            batch.endpoint,
                            request.sample,
                            request.content,
                            outcome,
                            {"batch_id": batch.batch_id},
                        )
                    except ProviderError as exc:
                        collected(key, exc)
                        continue
                collected(key, None)
            else:
                collected(key, outcome)
        ended.append(batch)
    if ended:
        # Forgotten only once what they bought is on disk: a kill before that collects again.
        if writer is not None:
            writer.sync()
        journal.remove(ended)


async def _create_once(
    http: HttpLayer,
    limits: Limits,
    send: Callable[[Limits], Awaitable[Created]],
    find: Callable[[], Awaitable[Created | None]],
) -> Created:
    """Create a batch with ``send``, retried as the HTTP layer retries, except that after an
    error that leaves unknown whether it was created (a timeout, a 5xx) the batch is looked
    for with ``find`` first: a creation is not idempotent, and a retry of one that was
    created would buy its requests twice."""
    once = limits.model_copy(update={"max_retries": 0})
    number = 1
    while True:
        try:
            return await send(once)
        except ProviderError as exc:
            if not exc.retryable or number > limits.max_retries:
                exc.attempts = number
                raise
            if exc.kind in _UNKNOWN_OUTCOME:
                found = await find()
                if found is not None:
                    return found
            await asyncio.sleep(http.retry_delay(exc, number))
            number += 1


def _api(http: HttpLayer, pinned: _Pinned, batch: Batch) -> _OpenAI | _Anthropic | _Gemini:
    if batch.api == "openai":
        return _OpenAI(http, pinned, batch.endpoint)
    if batch.api == "gemini":
        return _Gemini(http, pinned, batch)
    return _Anthropic(http, pinned, batch.endpoint)


def _completion(provider: Provider, body: Any) -> Completion | ProviderError:
    try:
        parsed = provider.parse(body)
    except ProviderError as exc:
        return exc
    return replace(parsed, batch=True)


def _status_error(status: int, body: Any, default: str) -> ProviderError:
    """A request's error inside a batch, as the live HTTP layer would name its status."""
    message = default
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict) and err.get("message"):
        message = str(err["message"])
    text = f"HTTP {status} in a batch: {' '.join(message.split())[:200]}"
    if status == 429:
        return ProviderError("rate_limited", text, status=status)
    if status >= 500:
        return ProviderError("server", text, status=status)
    if status in (401, 403):
        return ProviderError("auth", text, status=status)
    return ProviderError("client", text, status=status)


def _jsonl(data: bytes) -> list[dict[str, Any]]:
    out = []
    for line in data.splitlines():
        if line.strip():
            try:
                value = load_json(line)
            except ValueError:
                raise ProviderError("malformed", "a batch result line is not JSON") from None
            if isinstance(value, dict):
                out.append(value)
    return out


def _json(data: bytes) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except ValueError:
        raise ProviderError("malformed", "a batch API answer is not JSON") from None
    if not isinstance(value, dict):
        raise ProviderError("malformed", "a batch API answer is not a JSON object")
    return value


def _timestamp(value: Any) -> float | None:
    """Seconds since the epoch of a provider's time: a number, or an ISO 8601 string."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value).timestamp()
        except ValueError:
            return None
    return None


def _iso(timestamp: Any) -> str | None:
    if isinstance(timestamp, int | float) and not isinstance(timestamp, bool):
        return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")
    return timestamp if isinstance(timestamp, str) else None


class _OpenAI:
    """OpenAI's Files and Batches APIs, for one pin's requests to ``endpoint``."""

    def __init__(self, http: HttpLayer, pinned: _Pinned, endpoint: str) -> None:
        self.http, self.pin, self.provider = http, pinned.pin, pinned.provider
        self.pin_id = pinned.pin_id
        suffix = next((s for s in _OPENAI_SUFFIXES if endpoint.endswith(s)), None)
        if suffix is None:
            raise ProviderError("client", f"{endpoint} has no batch API")
        self.base = endpoint[: -len(suffix)]
        self.url = "/v1" + suffix
        """The endpoint as a batch's requests name it."""

    async def _call(self, method: str, url: str, content: bytes = b"", **kw: Any) -> bytes:
        headers = self.provider.headers(self.pin)
        return await self.http.call(
            self.pin_id, self.pin.limits, method, url, headers, content, **kw
        )

    async def upload(self, local_id: str, requests: list[BatchRequest]) -> str:
        head = b'{"custom_id":"%s","method":"POST","url":"' + self.url.encode() + b'","body":'
        lines = b"".join(head % r.key.encode() + r.content + b"}\n" for r in requests)
        boundary = f"evalreg-{secrets.token_hex(12)}"
        body = b"".join(
            [
                f'--{boundary}\r\ncontent-disposition: form-data; name="purpose"\r\n\r\n'
                "batch\r\n".encode(),
                f'--{boundary}\r\ncontent-disposition: form-data; name="file"; '
                f'filename="evalreg-{local_id}.jsonl"\r\n'
                "content-type: application/jsonl\r\n\r\n".encode(),
                lines,
                f"\r\n--{boundary}--\r\n".encode(),
            ]
        )
        answer = _json(
            await self._call(
                "POST",
                f"{self.base}/files",
                body,
                content_type=f"multipart/form-data; boundary={boundary}",
            )
        )
        return str(answer["id"])

    async def find(self, file_id: str) -> Created | None:
        """The batch already created from ``file_id``, if any (its creation's answer was
        lost): the account's batches, newest first, a page at a time."""
        after = ""
        for _ in range(20):
            page = _json(await self._call("GET", f"{self.base}/batches?limit=100{after}"))
            for item in page.get("data") or []:
                if isinstance(item, dict) and item.get("input_file_id") == file_id:
                    return str(item["id"]), _iso(item.get("expires_at"))
            if not page.get("has_more") or not page.get("last_id"):
                return None
            after = f"&after={page['last_id']}"
        return None

    async def create(self, file_id: str, local_id: str) -> Created:
        """Create the batch (:func:`_create_once`: looked for by its file before a retry)."""
        body = {
            "input_file_id": file_id,
            "endpoint": self.url,
            "completion_window": "24h",
            "metadata": {"evalreg_batch": local_id},
        }
        content = json.dumps(body).encode()
        headers = self.provider.headers(self.pin)
        url = f"{self.base}/batches"

        async def send(once: Limits) -> Created:
            answer = _json(await self.http.call(self.pin_id, once, "POST", url, headers, content))
            return str(answer["id"]), _iso(answer.get("expires_at"))

        return await _create_once(self.http, self.pin.limits, send, lambda: self.find(file_id))

    async def results(self, batch_id: str) -> Results | None:
        """Each request's outcome once the batch has ended (None while it runs)."""
        batch = _json(await self._call("GET", f"{self.base}/batches/{batch_id}"))
        status = batch.get("status")
        if status not in _OPENAI_ENDED:
            return None
        out: dict[str, Completion | ProviderError] = {}
        for name in ("output_file_id", "error_file_id"):
            file_id = batch.get(name)
            if not file_id:
                continue
            data = await self._call("GET", f"{self.base}/files/{file_id}/content")
            for line in _jsonl(data):
                key = line.get("custom_id")
                if isinstance(key, str):
                    out[key] = self._outcome(line)
        if status == "completed":
            return out, None
        kind = "batch_expired" if status == "expired" else f"batch_{status}"
        return out, ProviderError(kind, self._why(batch))

    def _outcome(self, line: dict[str, Any]) -> Completion | ProviderError:
        error = line.get("error")
        if isinstance(error, dict):
            code = str(error.get("code") or "error")
            kind = "batch_expired" if code == "batch_expired" else "batch_error"
            return ProviderError(kind, f"{code}: {error.get('message') or ''}".strip())
        response = line.get("response") or {}
        status = response.get("status_code")
        body = response.get("body")
        if status == 200:
            return _completion(self.provider, body)
        if not isinstance(status, int) or isinstance(status, bool):
            return ProviderError("malformed", "a batch result line has no status_code")
        return _status_error(status, body, "error")

    @staticmethod
    def _why(batch: dict[str, Any]) -> str:
        status = batch.get("status")
        errors = (batch.get("errors") or {}).get("data") or []
        said = "; ".join(str(e.get("message")) for e in errors if isinstance(e, dict))
        return f"the batch {batch.get('id')} ended {status}" + (f": {said}" if said else "")


class _Anthropic:
    """Anthropic's Message Batches API, for one pin's requests to ``endpoint``."""

    def __init__(self, http: HttpLayer, pinned: _Pinned, endpoint: str) -> None:
        self.http, self.pin, self.provider = http, pinned.pin, pinned.provider
        self.pin_id = pinned.pin_id
        self.url = endpoint + "/batches"
        self.origin = urlsplit(endpoint)[:2]

    async def _call(self, method: str, url: str, content: bytes = b"") -> bytes:
        headers = self.provider.headers(self.pin)
        return await self.http.call(self.pin_id, self.pin.limits, method, url, headers, content)

    async def create(self, batch: Batch, requests: list[BatchRequest]) -> Created:
        """Create the batch (:func:`_create_once`: looked for before a retry)."""
        parts = (b'{"custom_id":"%s","params":%b}' % (r.key.encode(), r.content) for r in requests)
        body = b'{"requests":[' + b",".join(parts) + b"]}"
        headers = self.provider.headers(self.pin)

        async def send(once: Limits) -> Created:
            answer = _json(await self.http.call(self.pin_id, once, "POST", self.url, headers, body))
            return str(answer["id"]), _iso(answer.get("expires_at"))

        async def find() -> Created | None:
            return (await self.find(batch, len(requests), set()))[0]

        return await _create_once(self.http, self.pin.limits, send, find)

    async def find(self, batch: Batch, count: int, taken: set[str]) -> tuple[Created | None, int]:
        """The batch created for ``batch`` whose creation's answer was lost, and how many
        batches could be it.

        Message Batches take no idempotency key and carry no name, so a batch is taken to be
        this one when it is the only batch of the workspace created since the intent was
        journalled (less :data:`CLOCK_SKEW_S`) that holds exactly ``count`` requests and is
        not journalled (``taken``) already. A wrong match costs no purchase: its results are
        read by custom id, which is the store key, and a request it lacks is an error,
        bought again by the next run.
        """
        since = datetime.fromisoformat(batch.created_utc).timestamp() - CLOCK_SKEW_S
        matches: list[Created] = []
        after = ""
        for _ in range(20):
            page = _json(await self._call("GET", f"{self.url}?limit=100{after}"))
            listed = [b for b in page.get("data") or [] if isinstance(b, dict)]
            for entry in listed:
                created = _timestamp(entry.get("created_at"))
                if created is None:
                    continue  # cannot be told to be since the intent: not taken for it
                if created < since:  # newest first: the rest are older still
                    return (matches[0] if len(matches) == 1 else None), len(matches)
                counts = entry.get("request_counts")
                total = (
                    sum(v for v in counts.values() if type(v) is int)
                    if isinstance(counts, dict)
                    else -1
                )
                ident = entry.get("id")
                if total == count and isinstance(ident, str) and ident not in taken:
                    matches.append((ident, _iso(entry.get("expires_at"))))
            last = page.get("last_id")
            if page.get("has_more") is not True or not isinstance(last, str) or not listed:
                break
            after = f"&after_id={quote(last, safe='')}"
        return (matches[0] if len(matches) == 1 else None), len(matches)

    async def results(self, batch_id: str) -> Results | None:
        batch = _json(await self._call("GET", f"{self.url}/{batch_id}"))
        if batch.get("processing_status") != "ended":
            return None
        results_url = batch.get("results_url")
        if not isinstance(results_url, str) or urlsplit(results_url)[:2] != self.origin:
            # The key goes only where the pin's requests go.
            raise ProviderError(
                "malformed", f"batch {batch_id}: results_url {results_url!r} is not at the API"
            )
        out: dict[str, Completion | ProviderError] = {}
        for line in _jsonl(await self._call("GET", results_url)):
            key, result = line.get("custom_id"), line.get("result") or {}
            if not isinstance(key, str) or not isinstance(result, dict):
                continue
            kind = result.get("type")
            if kind == "succeeded":
                out[key] = _completion(self.provider, result.get("message"))
            elif kind == "errored":
                error = (result.get("error") or {}).get("error") or {}
                name = str(error.get("type") or "error")
                text = f"{name} in a batch: {error.get('message') or ''}".strip()
                server = name in ("api_error", "overloaded_error")
                out[key] = ProviderError("server" if server else "client", text)
            else:  # expired, canceled
                out[key] = ProviderError(
                    f"batch_{kind}", f"the request {kind} in batch {batch_id} before it ran"
                )
        return out, None


class _Gemini:
    """The Gemini API's batch mode, for one batch of a pin's requests, inlined."""

    def __init__(self, http: HttpLayer, pinned: _Pinned, batch: Batch) -> None:
        self.http, self.pin, self.provider = http, pinned.pin, pinned.provider
        self.pin_id = pinned.pin_id
        base, versioned, _ = batch.endpoint.partition("/v1beta/")
        if not versioned or not batch.endpoint.endswith(_GEMINI_SUFFIX):
            raise ProviderError("client", f"{batch.endpoint} has no batch API")
        self.url = batch.endpoint[: -len(_GEMINI_SUFFIX)] + ":batchGenerateContent"
        self.api = base + "/v1beta"
        self.name = f"evalreg-{batch.local_id}"
        """The batch's display name: how a run finds it again if its creation's answer
        was lost."""
        self.keys = batch.keys

    async def _call(self, method: str, url: str, content: bytes = b"") -> bytes:
        headers = self.provider.headers(self.pin)
        return await self.http.call(self.pin_id, self.pin.limits, method, url, headers, content)

    async def create(self, requests: list[BatchRequest]) -> Created:
        """Create the batch (:func:`_create_once`: looked for by its name before a retry)."""
        parts = (
            b'{"request":%b,"metadata":{"key":"%s"}}' % (r.content, r.key.encode())
            for r in requests
        )
        body = b"".join(
            [
                b'{"batch":{"display_name":"%s",' % self.name.encode(),
                b'"input_config":{"requests":{"requests":[',
                b",".join(parts),
                b"]}}}}",
            ]
        )
        headers = self.provider.headers(self.pin)

        async def send(once: Limits) -> Created:
            answer = await self.http.call(self.pin_id, once, "POST", self.url, headers, body)
            return self._named(_json(answer)), None

        return await _create_once(self.http, self.pin.limits, send, self.find)

    async def find(self) -> Created | None:
        """The batch of this name already created (its creation's answer was lost): the
        account's batches, a page at a time."""
        token = ""
        for _ in range(20):
            page = _json(await self._call("GET", f"{self.api}/batches?pageSize=100{token}"))
            for operation in page.get("operations") or []:
                if not isinstance(operation, dict):
                    continue
                metadata = operation.get("metadata")
                if isinstance(metadata, dict) and metadata.get("displayName") == self.name:
                    return self._named(operation), None
            following = page.get("nextPageToken")
            if not isinstance(following, str) or not following:
                return None
            token = f"&pageToken={quote(following, safe='')}"
        return None

    async def results(self, name: str) -> Results | None:
        """Each request's outcome once the batch has ended (None while it runs)."""
        operation = _json(await self._call("GET", f"{self.api}/{name}"))
        metadata = operation.get("metadata")
        if not isinstance(metadata, dict):
            metadata = {}
        state = str(metadata.get("state") or operation.get("state") or "")
        state = state.removeprefix("BATCH_STATE_").removeprefix("JOB_STATE_")
        if state not in _GEMINI_ENDED:
            if operation.get("done") is not True:
                return None
            state = "FAILED" if operation.get("error") else "SUCCEEDED"
        output = operation.get("response") or metadata.get("output") or {}
        inlined = output.get("inlinedResponses") if isinstance(output, dict) else None
        entries = inlined.get("inlinedResponses") if isinstance(inlined, dict) else None
        if not isinstance(entries, list):
            entries = []
        # In the order of the requests, as documented: used for an entry without its key.
        in_order = len(entries) == len(self.keys)
        out: dict[str, Completion | ProviderError] = {}
        for index, entry in enumerate(entries):
            if not isinstance(entry, dict):
                continue
            metadata_of = entry.get("metadata")
            key = metadata_of.get("key") if isinstance(metadata_of, dict) else None
            if not isinstance(key, str):
                if not in_order:
                    continue
                key = self.keys[index]
            out[key] = self._outcome(entry)
        if state == "SUCCEEDED":
            return out, None
        kind = f"batch_{state.lower()}"
        error = operation.get("error")
        said = error.get("message") if isinstance(error, dict) else None
        why = f"the batch {name} ended {state.lower()}" + (f": {said}" if said else "")
        return out, ProviderError(kind, why)

    def _outcome(self, entry: dict[str, Any]) -> Completion | ProviderError:
        error = entry.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            status = _GRPC_HTTP.get(code, 500) if type(code) is int else 500
            return _status_error(status, {"error": error}, "error")
        if not isinstance(entry.get("response"), dict):
            return ProviderError("malformed", "a batch response has neither response nor error")
        return _completion(self.provider, entry["response"])

    @staticmethod
    def _named(operation: dict[str, Any]) -> str:
        name = operation.get("name")
        if not isinstance(name, str) or not name.startswith("batches/"):
            raise ProviderError("malformed", "the Gemini API named no batches/... for a batch")
        return name
