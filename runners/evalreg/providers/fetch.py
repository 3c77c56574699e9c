"""Buy missing responses: run request jobs concurrently, store successes, count errors.

This is the only place live model calls happen (``batch`` buys through batch APIs and
stores with ``put_response``, the same records). A job whose key is already stored is never
sent; identical jobs in one run share a single request; provider errors are returned
(and logged by the caller), never stored, so the next run retries them.

The HTTP layer holds and stops each pin's requests for the whole run (``providers/http.py``):
a pin's first request goes alone, as its preflight; an answer that refuses every request of
the pin (a bad key, a model, route or method that does not exist, no quota left), or a row of
400s or 422s before it has answered, keeps the rest from being sent, and the run reports the
provider's own message once instead of one error per item. The preflight costs nothing
extra: the first request is a real one, stored when it succeeds. A judge pin refused while
the candidates are bought is asked nothing more.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from evalreg import redaction
from evalreg.canonical import canonical_bytes
from evalreg.providers.base import (
    Completion,
    Messages,
    Provider,
    ProviderError,
    http_method,
    key_scope,
    output_cap,
    signer,
)
from evalreg.providers.tools import Toolset
from evalreg.registry.schema import Pin
from evalreg.store.segments import ResponseStore, SegmentWriter, encode_record, request_key, utc_now

if TYPE_CHECKING:
    # The HTTP layer (and httpx with it) is loaded by a run that buys, not by one that only
    # reads the store (``run --offline``, a re-grade).
    from evalreg.providers.http import HttpLayer, Reply


@dataclass(frozen=True)
class Job:
    """One request to make (or find in the store)."""

    key: str
    pin_id: str
    pin: Pin
    provider: Provider
    endpoint: str
    body: dict[str, Any]
    content: bytes
    sample: int
    label: str


@dataclass(frozen=True)
class Request:
    """One exact request body; every sample of an item sends it (each under its own key)."""

    pin_id: str
    pin: Pin
    provider: Provider
    endpoint: str
    body: dict[str, Any]
    content: bytes
    scope: str
    """What the key holds besides the body: the endpoint (``base.key_scope``)."""

    def key(self, sample: int) -> str:
        return request_key(self.provider.name, self.scope, self.content, sample)

    def job(self, sample: int, label: str, key: str | None = None) -> Job:
        """Sample ``sample`` of this request (``key``: its key, when already computed)."""
        return Job(
            key or self.key(sample),
            self.pin_id,
            self.pin,
            self.provider,
            self.endpoint,
            self.body,
            self.content,
            sample,
            label,
        )


def make_request(
    pin_id: str,
    pin: Pin,
    provider: Provider,
    messages: Messages,
    item_input: dict[str, Any] | None,
    tools: Toolset | None = None,
) -> Request:
    """Build the exact request body (its canonical bytes are what the key hashes)."""
    body = provider.body(pin, messages, item_input, tools)
    return Request(
        pin_id,
        pin,
        provider,
        provider.endpoint(pin),
        body,
        canonical_bytes(body),
        key_scope(provider, pin),
    )


def make_job(
    pin_id: str,
    pin: Pin,
    provider: Provider,
    messages: Messages,
    item_input: dict[str, Any] | None,
    sample: int,
    label: str,
    tools: Toolset | None = None,
) -> Job:
    """Build the exact request body and its store key."""
    return make_request(pin_id, pin, provider, messages, item_input, tools).job(sample, label)


@dataclass(frozen=True)
class JobError:
    label: str
    key: str
    pin_id: str
    kind: str
    status: int | None
    message: str
    attempts: int = 1

    def as_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()

    def cause(self) -> str:
        """Why the request has no response, in a few words: "HTTP 500 after 3 attempts"."""
        if self.status is not None and self.status != 200:
            tries = f" after {self.attempts} attempts" if self.attempts > 1 else ""
            return f"HTTP {self.status}{tries}"
        return f"{self.kind}: {self.message}"


@dataclass
class FetchReport:
    total: int = 0
    cached: int = 0
    fetched: int = 0
    shared: int = 0
    """Jobs answered by an identical request made for another job in this run."""
    errors: list[JobError] = field(default_factory=list)

    @property
    def error_kinds(self) -> Counter[str]:
        return Counter(e.kind for e in self.errors)


class OfflineMiss(ProviderError):
    def __init__(self, label: str) -> None:
        super().__init__("offline_miss", f"no stored response for {label} and --offline was given")


Progress = Callable[[Job, str], None]
"""Called once per job with "cached", "fetched", "shared" or "error"."""

_FEED_EVERY = 64
"""Jobs taken from a generator between two turns of the event loop: making one costs
tens of microseconds, and answers wait for the loop's turn."""


async def fetch(
    jobs: Iterable[Job],
    store: ResponseStore,
    writer: SegmentWriter | None,
    http: HttpLayer | None,
    *,
    offline: bool = False,
    concurrency: int = 64,
    progress: Progress | None = None,
    admit: Callable[[Job], bool] | None = None,
) -> FetchReport:
    """Make sure every job's response is in ``store``; return what happened.

    ``jobs`` is taken as the requests go: the first are sent while a generator may still
    be making the later ones (a run keys its requests so). ``admit`` is asked before each
    request is bought (a budget says no by returning False; the job is then reported as a
    ``budget`` error and not sent).
    """
    report = FetchReport()
    queue: asyncio.Queue[Job | None] = asyncio.Queue()
    workers = max(1, concurrency)

    async def feed() -> None:
        for made, job in enumerate(jobs):
            report.total += 1
            if job.key in store:
                report.cached += 1
                if progress:
                    progress(job, "cached")
            else:
                queue.put_nowait(job)
            if made % _FEED_EVERY == 0:
                # The requests queued so far go out, and answers are read, meanwhile.
                await asyncio.sleep(0)
        for _ in range(workers):
            queue.put_nowait(None)

    inflight: dict[str, asyncio.Future[bool]] = {}

    async def one(job: Job) -> None:
        if job.key in store:
            report.cached += 1
            outcome = "cached"
        elif job.key in inflight:
            ok = await inflight[job.key]
            outcome = "shared" if ok else "error"
            if ok:
                report.shared += 1
            else:
                report.errors.append(
                    JobError(
                        job.label,
                        job.key,
                        job.pin_id,
                        "shared_error",
                        None,
                        "an identical request failed in this run",
                    )
                )
        else:
            future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            inflight[job.key] = future
            try:
                await _buy(job, store, writer, http, offline, admit)
                report.fetched += 1
                outcome = "fetched"
                future.set_result(True)
            except ProviderError as exc:
                report.errors.append(
                    JobError(
                        job.label,
                        job.key,
                        job.pin_id,
                        exc.kind,
                        exc.status,
                        str(exc),
                        exc.attempts,
                    )
                )
                outcome = "error"
                future.set_result(False)
            finally:
                del inflight[job.key]
        if progress:
            progress(job, outcome)

    async def worker() -> None:
        while (job := await queue.get()) is not None:
            await one(job)

    tasks = [asyncio.create_task(worker()) for _ in range(workers)]
    try:
        await feed()
        await asyncio.gather(*tasks)
    finally:
        # A job that could not be made (or a worker's failure) stops the others before
        # the caller closes what they write to.
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    if writer is not None:
        writer.sync()
    return report


async def _buy(
    job: Job,
    store: ResponseStore,
    writer: SegmentWriter | None,
    http: HttpLayer | None,
    offline: bool,
    admit: Callable[[Job], bool] | None,
) -> None:
    if offline:
        raise OfflineMiss(job.label)

    def admitted() -> None:
        if admit is not None and not admit(job):
            raise ProviderError("budget", "not sent: the --max-cost budget would be exceeded")

    if job.provider.http:
        if http is None:
            raise ProviderError("client", "no HTTP layer")
        signed = signer(job.provider)
        # Admitted when its turn comes: a request of a pin that is refused meanwhile spends
        # nothing of the budget.
        read = getattr(job.provider, "read", None)  # a provider that reads raw answers
        reply = await http.post(
            job.pin_id,
            job.pin.limits,
            job.endpoint,
            job.provider.headers(job.pin),
            job.content,
            job.provider.parse if read is None else partial(read, job.pin),
            estimated_tokens=len(job.content) // 4 + (output_cap(job.body) or 0),
            sign=None if signed is None else partial(signed.sign, job.pin),
            admit=None if admit is None else admitted,
            method=http_method(job.provider, job.pin),
            raw=read is not None,
        )
    else:
        admitted()
        reply = _call_local(job)
    record = {"latency_ms": reply.latency_ms, "attempts": reply.attempts}
    put_response(
        store,
        writer,
        job.key,
        job.provider.name,
        job.endpoint,
        job.sample,
        job.content,
        reply.completion,
        record,
    )


def put_response(
    store: ResponseStore,
    writer: SegmentWriter | None,
    key: str,
    provider: str,
    endpoint: str,
    sample: int,
    content: bytes,
    completion: Completion,
    details: dict[str, Any],
) -> None:
    """Store the response to the exact request ``content`` under ``key`` (redacted):
    ``details`` says how it was bought (latency and attempts, or the batch it came in)."""
    record = {
        "provider": provider,
        "endpoint": endpoint,
        "sample": sample,
        "response": completion.as_record(),
        **details,
        "created_utc": utc_now(),
    }
    # The request field is the exact body sent, already canonical JSON.
    try:
        line = encode_record(key, record, encoded={"request": content})
    except ValueError as exc:  # a lone surrogate in the text, say: no record can hold it
        raise ProviderError("malformed", f"the response cannot be stored: {exc}") from None
    # Asked after the request: a provider may have made a secret for it (an access token).
    redactor = redaction.current()
    if redactor:
        # A model may quote the key it was called with, or a provider echo it: the record
        # is redacted before it is stored and graded as stored, so a replay grades the
        # same bytes. The store key that leads the line is left alone.
        head = line.index(b",") + 1
        line = line[:head] + redactor.data(line[head:])
    if writer is not None:
        writer.put(line)
    store.remember(key, line)


def _call_local(job: Job) -> Reply:
    from evalreg.providers.http import Reply

    call = getattr(job.provider, "call", None)
    if call is None:
        raise ProviderError("client", f"provider {job.provider.name} cannot be called locally")
    completion, latency_ms = call(job.pin, job.body)
    return Reply(completion, latency_ms, 1)
