"""The one HTTP layer every HTTP provider shares: client, connections, timeouts, retries, limits.

Requests go through one ``httpx.AsyncClient``. Its transport is ``ConnectionPool``: keep-alive
HTTP/1.1 connections kept per origin and taken or returned in constant time. httpcore's pool
(httpx's default) re-examines every connection of the pool for every queued request and
probes each idle socket on the way; at 64 requests in flight against one endpoint that costs
more than the requests themselves (tests/benchmarks/http_clients.py measures the choices;
httpx-aiohttp's ``AiohttpTransport``, the maintained alternative, costs about 30 % of the
request rate at 64 in flight there).

Corporate networks: ``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY`` and ``NO_PROXY`` (either
case) are honoured as httpx reads them (``proxy_mounts``); an origin they send through a
proxy goes over httpx's own proxy transport (a CONNECT tunnel for https), credentials in the
proxy URL included and never shown (``redaction``). Certificates are verified against
``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` when set (certifi's bundle otherwise), plus the
``ca_bundle`` of the pin (``limits.ca_bundle``) or of the registry (``network.ca_bundle`` in
``registry/evalreg.yaml``).

Retries cover 408, 429, the 5xx statuses but 501, timeouts, connection errors and malformed
bodies, with exponential backoff and jitter, honouring ``Retry-After``. Per-pin concurrency is
a semaphore; requests- and tokens-per-minute are leaky buckets (aiolimiter). A response body
longer than the pin's ``limits.max_response_bytes`` (on the wire or decoded) is read no
further: a ``too_large`` error for that request, not retried.

Answers that will not change are never retried, and some stop the pin's model requests for
the rest of the run (``_PinState``):

* ``PIN_STATUSES`` (401, 403, 404, 405, 501) and a spent quota refuse every request of a pin
  alike: a bad key, a model or route that does not exist, a method or feature the endpoint
  lacks. After the first, the pin's remaining requests fail at once as ``refused``, unsent,
  each quoting that answer.
* ``ITEM_STATUSES`` (400, 422) usually refuse one request for what it holds (a prompt too
  long, a content filter): that request's error, and the others go on. But a parameter the
  model does not take refuses every request from the first: so the same status answering
  ``REFUSED_AFTER`` different requests in a row, before any request of the pin has been
  answered in this run, refuses the pin as above. Once one has been, the pin's parameters
  work, and a 400 or 422 is only ever its request's. An answer that names a cause in the
  request's content (a content filter, a prompt too long: ``_names_item_cause``) never
  counts towards such a row: otherwise an eval set whose first items are all filtered would
  stop the pin at them on every run, and its other items would never be bought.

A pin is *in doubt* until its first model request is over, and again after a 400 or 422 that
may begin such a row, until another answer ends the row: while in doubt its requests go one
at a time. So a pin refused at its first request sends exactly one, a pin whose first
``REFUSED_AFTER`` requests are refused sends exactly those, and a pin refused later sends at
most the requests it had in flight then (``limits.concurrency``). Batch API calls (``call``)
are neither held nor refused this way: only their connection failures count.

A pin whose endpoint refuses or drops ``UNREACHABLE_AFTER`` connections in a row, with no
answer between, is taken for down: its remaining requests fail at once as ``unreachable``
instead of each retrying for half a minute against a server that is not there.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import random
import re
import select
import ssl
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.request import getproxies

import httpx
from aiolimiter import AsyncLimiter

from evalreg.canonical import loads_finite
from evalreg.providers.base import Completion, ProviderError
from evalreg.redaction import redact
from evalreg.registry.schema import Limits

T = TypeVar("T")
MAX_RETRY_AFTER_S = 120.0
MAX_HEADER_SETS = 256
"""Distinct header sets kept merged with the client's defaults (a run uses a handful)."""
UNREACHABLE_AFTER = 5
"""Consecutive connection failures of one pin (no answer between) that open its breaker."""
PIN_STATUSES = frozenset({401, 403, 404, 405, 501})
"""Statuses that refuse every request of a pin alike: credentials (401, 403), a model,
deployment or route that does not exist (404), a method (405) or a feature (501) the
endpoint does not have. Never retried; the first stops the pin."""
ITEM_STATUSES = frozenset({400, 422})
"""Statuses that usually refuse one request for what it holds (a prompt too long, a content
filter): never retried, that request's error; the pin's only as ``REFUSED_AFTER`` says."""
REFUSED_AFTER = 5
"""Different requests of a pin not yet answered in this run that the same ``ITEM_STATUSES``
status answers in a row, with no other answer between, that stop the pin. A parameter the
model does not take refuses every request alike, and five such refusals cost five quick
answers that are not billed; a content filter or a context limit refuses items here and
there, and five in a row before any item is answered is rare even where a slice of
adversarial items comes first. The samples of one item send one body, and count once."""


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with jitter between retries (seconds): after the n-th failed
    attempt, wait ``min(initial * 2**(n-1) + uniform(0, jitter), maximum)``."""

    initial: float = 0.5
    maximum: float = 30.0
    jitter: float = 0.5

    def delay(self, attempt: int) -> float:
        wait = self.initial * 2.0 ** (attempt - 1) + random.uniform(0.0, self.jitter)
        return max(0.0, min(wait, self.maximum))


@dataclass(frozen=True)
class Reply:
    completion: Completion
    latency_ms: int
    attempts: int


Throttle = tuple[asyncio.Semaphore, AsyncLimiter | None, AsyncLimiter | None]
"""A pin's request limits: concurrent requests, requests and tokens a minute."""


_CLOSED = httpx.ByteStream(b"")
"""What a response's stream is once its body has been read and the stream closed."""


class _NoCookies(httpx.Cookies):
    """A cookie jar that keeps nothing a response sets."""

    def extract_cookies(self, response: httpx.Response) -> None:
        return None


_NO_COOKIES = _NoCookies()


class _StatelessClient(httpx.AsyncClient):
    """An ``httpx.AsyncClient`` that never keeps cookies.

    Model APIs authenticate every request with its own key; a cookie one response sets
    (a load balancer's, say) must not ride along on requests for other pins. The client's
    public ``cookies`` is a jar that keeps nothing and is never replaced, so no response
    reaches the standard library's cookie machinery: a jar that merely refuses cookies
    (a ``CookieJar`` given as ``cookies=``) still has httpx build a ``urllib`` request for
    every response, tens of microseconds each, and the parsing of each ``Set-Cookie`` comes
    on top (a sixth of the client's time per request at 1,000 requests a second).
    """

    @property
    def cookies(self) -> httpx.Cookies:
        return _NO_COOKIES

    @cookies.setter
    def cookies(self, cookies: object) -> None:
        return None


def proxy_mounts(
    verify: ssl.SSLContext | bool, limits: httpx.Limits
) -> dict[str, httpx.AsyncBaseTransport | None]:
    """The proxies the environment asks for, as ``mounts`` of an ``httpx.AsyncClient``:
    httpx's own proxy transport for each proxied scheme, ``None`` (the client's own
    transport) for each host ``NO_PROXY`` sends direct.

    httpx reads these variables only for a client it builds its own transport for; this
    reads them the way it does (``urllib.request.getproxies``, then ``NO_PROXY`` as curl
    reads it: ``*`` turns every proxy off, ``.example.com`` covers its subdomains,
    ``example.com`` the domain and its subdomains, an IP address or ``localhost`` itself).
    """
    found = getproxies()
    patterns: dict[str, str | None] = {}
    for scheme in ("http", "https", "all"):
        if found.get(scheme):
            url = found[scheme]
            patterns[f"{scheme}://"] = url if "://" in url else f"http://{url}"
    for host in (h.strip() for h in found.get("no", "").split(",")):
        if host == "*":
            return {}
        if host:
            patterns[_no_proxy_pattern(host)] = None
    return {
        pattern: None
        if url is None
        else httpx.AsyncHTTPTransport(verify=verify, limits=limits, proxy=httpx.Proxy(url))
        for pattern, url in patterns.items()
    }


def _no_proxy_pattern(host: str) -> str:
    """The ``mounts`` key that sends ``host`` (an entry of ``NO_PROXY``) direct."""
    if "://" in host:
        return host
    address = host.split("/")[0]
    for kind, form in ((ipaddress.IPv4Address, "all://{}"), (ipaddress.IPv6Address, "all://[{}]")):
        try:
            kind(address)
        except ValueError:
            continue
        return form.format(host)
    return f"all://{host}" if host.lower() == "localhost" else f"all://*{host}"


class HttpLayer:
    """Sends request bodies for all pins of a run over one ``httpx.AsyncClient`` (one per
    set of extra CA bundles the pins trust).

    ``transport`` replaces the connection pool and the proxies (tests pass
    ``httpx.MockTransport``). ``ca_bundle`` is the registry's extra CA certificates
    (``network.ca_bundle``), trusted for every pin; a relative path (the registry's and a
    pin's ``limits.ca_bundle``) is taken from ``root``, the repository.
    """

    def __init__(
        self,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        backoff: Backoff | None = None,
        max_connections: int = 512,
        ca_bundle: str | None = None,
        root: Path | None = None,
    ) -> None:
        self._transport = transport
        self._max_connections = max_connections
        self._ca_bundle = ca_bundle
        self._root = root
        self._clients: dict[tuple[str, ...], _StatelessClient] = {}
        self._direct: dict[int, ConnectionPool] = {}
        """By client (``id``), its connection pool, when no proxy is mounted beside it: a
        request is then handed to the pool itself (``AsyncBaseTransport``'s public
        ``handle_async_request``), without the client's routing, auth, redirect and cookie
        steps, which have nothing to do for it (no auth, no redirects followed, no
        cookies kept)."""
        self._by_bundle: dict[str | None, _StatelessClient] = {}
        self._client = self._client_for(())
        self._backoff = backoff or Backoff()
        self._throttles: dict[str, Throttle] = {}
        self._urls: dict[str, httpx.URL] = {}
        self._timeouts: dict[float, httpx.Timeout] = {}
        self._timeout_dicts: dict[int, dict[str, float | None]] = {}
        """``as_dict()`` of each timeout in ``_timeouts``, by identity (they live as long)."""
        self._merged_headers: dict[tuple[tuple[str, str], ...], httpx.Headers] = {}
        self._heads: dict[
            tuple[str, int, tuple[tuple[str, str], ...]], tuple[bytes, bytes, bool] | None
        ] = {}
        self._pins: dict[str, _PinState] = {}

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()

    def _client_for(self, bundles: tuple[str, ...]) -> _StatelessClient:
        """The client whose TLS connections also trust the CA certificates in ``bundles``
        (resolved paths): one client per distinct set, each with its own connections."""
        client = self._clients.get(bundles)
        if client is None:
            verify: ssl.SSLContext | bool = True
            if bundles:
                verify = httpx.create_ssl_context()  # SSL_CERT_FILE or certifi, then these
                for bundle in bundles:
                    try:
                        verify.load_verify_locations(cafile=bundle)
                    except (OSError, ssl.SSLError) as exc:
                        raise ProviderError(
                            "client", f"cannot load the CA bundle {bundle}: {exc}"
                        ) from None
            transport, mounts = self._transport, None
            if transport is None:
                limits = httpx.Limits(
                    max_connections=self._max_connections,
                    max_keepalive_connections=self._max_connections,
                )
                transport = ConnectionPool(
                    max_connections=self._max_connections or 512, verify=verify
                )
                mounts = proxy_mounts(verify, limits)
            client = self._clients[bundles] = _StatelessClient(
                transport=transport,
                mounts=mounts,
                timeout=httpx.Timeout(120.0, connect=15.0),
                follow_redirects=False,
            )
            if isinstance(transport, ConnectionPool) and not mounts:
                self._direct[id(client)] = transport
        return client

    def _client_of(self, ca_bundle: str | None) -> _StatelessClient:
        """The client for a pin whose ``limits.ca_bundle`` is ``ca_bundle``."""
        client = self._by_bundle.get(ca_bundle)
        if client is None:
            paths = []
            for bundle in (self._ca_bundle, ca_bundle):
                if bundle:
                    paths.append(str(bundle if self._root is None else self._root / bundle))
            client = self._by_bundle[ca_bundle] = self._client_for(tuple(dict.fromkeys(paths)))
        return client

    async def __aenter__(self) -> HttpLayer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _throttle(self, pin_id: str, limits: Limits) -> Throttle:
        throttle = self._throttles.get(pin_id)
        if throttle is None:
            rpm = (
                AsyncLimiter(limits.requests_per_minute, 60) if limits.requests_per_minute else None
            )
            tpm = AsyncLimiter(limits.tokens_per_minute, 60) if limits.tokens_per_minute else None
            throttle = self._throttles[pin_id] = (asyncio.Semaphore(limits.concurrency), rpm, tpm)
        return throttle

    def _url(self, url: str) -> httpx.URL:
        # Parsing a URL is a noticeable share of httpx's per-request cost; a run posts to
        # a handful of URLs.
        parsed = self._urls.get(url)
        if parsed is None:
            parsed = self._urls[url] = httpx.URL(url)
        return parsed

    def _timeout(self, seconds: float) -> httpx.Timeout:
        timeout = self._timeouts.get(seconds)
        if timeout is None:
            timeout = self._timeouts[seconds] = httpx.Timeout(seconds, connect=min(15.0, seconds))
            self._timeout_dicts[id(timeout)] = timeout.as_dict()
        return timeout

    def _headers(self, headers: dict[str, str]) -> httpx.Headers:
        """The client's default headers with ``headers`` over them (kept in memory only)."""
        key = tuple(headers.items())
        merged = self._merged_headers.get(key)
        if merged is None:
            if len(self._merged_headers) >= MAX_HEADER_SETS:
                self._merged_headers.clear()  # signed requests: every attempt's set is new
            merged = self._client.headers.copy()
            merged.update(headers)
            self._merged_headers[key] = merged
        return merged

    async def post(
        self,
        pin_id: str,
        limits: Limits,
        url: str,
        headers: dict[str, str],
        content: bytes,
        parse: Callable[[Any], Completion],
        *,
        estimated_tokens: int = 0,
        sign: Callable[[str, dict[str, str], bytes], dict[str, str]] | None = None,
        admit: Callable[[], None] | None = None,
        method: str = "POST",
        raw: bool = False,
    ) -> Reply:
        """POST ``content`` (already-serialised JSON) and parse the reply, retrying as needed.
        ``method`` sends it otherwise (PUT, PATCH); ``raw`` hands ``parse`` the answer's bytes
        instead of its decoded JSON.

        ``sign``, when given, returns the headers of each attempt from the URL, the headers
        and the body (a per-request signature or a short-lived token, made afresh for every
        retry). ``admit``, when given, is called once the request's turn has come and its
        pin is not stopped, before anything is sent: a ``ProviderError`` it raises (a
        budget's no) keeps the request from being sent.

        Raises ``ProviderError`` once retries are exhausted or the error is not retryable,
        and ``refused`` or ``unreachable`` (nothing sent) once the pin is stopped. While the
        pin is in doubt (the module's docstring), this waits for its requests to go one at a
        time.
        """
        state = self._state(pin_id)
        throttle = self._throttle(pin_id, limits)
        client = self._client_of(limits.ca_bundle)
        target = self._url(url)
        timeout = self._timeout(limits.timeout_s)
        send_headers = {"content-type": "application/json", **headers}

        async def attempt(number: int) -> Reply:
            return await self._attempt(
                state,
                client,
                throttle,
                target,
                send_headers,
                sign,
                content,
                timeout,
                limits.max_response_bytes,
                parse,
                estimated_tokens,
                number,
                method,
                raw,
            )

        alone = await state.admit()
        try:
            state.check(url, True)
            if admit is not None:
                admit()
        except ProviderError:
            if alone:
                state.went_alone(sent=False)  # still in doubt: the next request goes alone
            raise
        try:
            return await self._retrying(state, limits, url, attempt, content)
        finally:
            if alone:
                state.went_alone(sent=True)

    async def call(
        self,
        pin_id: str,
        limits: Limits,
        method: str,
        url: str,
        headers: dict[str, str],
        content: bytes = b"",
        *,
        content_type: str = "application/json",
        max_bytes: int = 1 << 30,
    ) -> bytes:
        """One API call that is not a model request (a batch's upload, creation, status or
        results): ``method`` ``url`` with ``content``, retried as ``post`` retries; the
        body of its 200 answer, at most ``max_bytes`` of it. The pin's concurrency limit
        applies; its per-minute limits count model requests only."""
        client = self._client_of(limits.ca_bundle)
        target = self._url(url)
        timeout = self._timeout(limits.timeout_s)
        send_headers = {"content-type": content_type, **headers} if content else headers
        semaphore = self._throttle(pin_id, limits)[0]

        async def attempt(number: int) -> bytes:
            async with semaphore:
                return await self._send(
                    client, target, send_headers, content, timeout, max_bytes, method=method
                )

        return await self._retrying(self._state(pin_id), limits, url, attempt, None)

    def _state(self, pin_id: str) -> _PinState:
        state = self._pins.get(pin_id)
        if state is None:
            state = self._pins[pin_id] = _PinState(pin_id)
        return state

    async def _retrying(
        self,
        state: _PinState,
        limits: Limits,
        url: str,
        attempt: Callable[[int], Awaitable[T]],
        body: bytes | None,
    ) -> T:
        """``attempt(1)``, ``attempt(2)``... until one succeeds, the error is not
        retryable or the pin's retries are spent; the pin's state hears every outcome.
        ``body`` is a model request's (None: another API call, see ``_PinState.record``)."""
        number = 1
        while True:
            state.check(url, body is not None)
            try:
                reply = await attempt(number)
            except ProviderError as exc:
                if exc.kind in NOT_SENT:
                    raise
                state.record(exc, body)
                if not exc.retryable or number > limits.max_retries:
                    exc.attempts = number
                    raise
                await asyncio.sleep(self.retry_delay(exc, number))
            else:
                state.record(None, body)
                return reply
            number += 1

    async def _attempt(
        self,
        state: _PinState,
        client: httpx.AsyncClient,
        throttle: Throttle,
        url: httpx.URL,
        headers: dict[str, str],
        sign: Callable[[str, dict[str, str], bytes], dict[str, str]] | None,
        content: bytes,
        timeout: httpx.Timeout,
        max_bytes: int,
        parse: Callable[[Any], Completion],
        estimated_tokens: int,
        number: int,
        method: str = "POST",
        raw: bool = False,
    ) -> Reply:
        semaphore, rpm, tpm = throttle
        if rpm is not None:
            await rpm.acquire()
        if tpm is not None and estimated_tokens:
            await tpm.acquire(min(estimated_tokens, tpm.max_rate))
        async with semaphore:
            # Asked again once its turn has come: the pin may have been stopped meanwhile,
            # by an answer to a request that was in flight while this one waited.
            state.check(url, True)
            if sign is not None:
                # Signed once the limits let it go: a SigV4 signature is refused once it is
                # five minutes old, and a request may wait longer than that for its turn.
                headers = sign(str(url), headers, content)
            started = time.perf_counter()
            body = await self._send(
                client, url, headers, content, timeout, max_bytes, method=method
            )
            latency_ms = round((time.perf_counter() - started) * 1000)
        return Reply(parse(body if raw else _json_of(body)), latency_ms, number)

    async def _send(
        self,
        client: httpx.AsyncClient,
        url: httpx.URL,
        headers: dict[str, str],
        content: bytes,
        timeout: httpx.Timeout,
        max_bytes: int,
        *,
        method: str = "POST",
    ) -> bytes:
        """Send (a POST unless ``method`` says otherwise) and return the body of a 200
        response, at most ``max_bytes`` of it."""
        pool = self._direct.get(id(client))
        try:
            # Made inside: a header that cannot be written is this request's error.
            head = self._raw_head(method, url, headers) if pool is not None and content else None
            if pool is not None and head is not None:
                # What the pool needs, written out here: no ``httpx.Request`` or
                # ``httpx.Response`` is made for a request to an origin no proxy is mounted
                # for, and whose answer is 200 and not content-encoded.
                answer = await pool.exchange(
                    url,
                    method,
                    b"%b%d%b" % (head[0], len(content), head[1]),
                    content,
                    self._timeout_dicts[id(timeout)],
                    max_bytes,
                    close=head[2],
                )
                if len(answer.body) > max_bytes:
                    raise ResponseTooLarge(max_bytes, answer.status)
                if answer.status == 200 and not answer.encoded:
                    return answer.body
                response, body = await _response_of(answer, max_bytes)
            else:
                response, body = await self._send_request(
                    client, pool, url, headers, content, timeout, max_bytes, method
                )
        except ResponseTooLarge as exc:
            raise ProviderError(
                "too_large",
                f"{exc} (the pin's limits.max_response_bytes); not stored",
                status=exc.status,
            ) from None
        except httpx.DecodingError as exc:
            raise ProviderError(
                "malformed", f"the body does not decode: {exc}", retryable=True
            ) from None
        except httpx.TimeoutException as exc:
            raise ProviderError(
                "timeout", f"{type(exc).__name__} after {timeout.read}s", retryable=True
            ) from None
        except httpx.TransportError as exc:
            raise ProviderError("connection", _connection_detail(exc), retryable=True) from None
        status = response.status_code
        if status == 200:
            return body
        detail = _error_detail(response, body)
        if status in (400, 429) and _quota_exhausted(body):
            # Not a rate limit: waiting does not help until the account is topped up.
            raise ProviderError("quota", detail, status=status)
        if status == 429:
            raise ProviderError(
                "rate_limited",
                detail,
                status=status,
                retryable=True,
                retry_after=retry_after(response.headers),
            )
        if status >= 500 and status != 501:
            raise ProviderError(
                "server",
                detail,
                status=status,
                retryable=True,
                retry_after=retry_after(response.headers),
            )
        if status in (401, 403):
            raise ProviderError("auth", detail, status=status)
        if status == 408:
            raise ProviderError("timeout", detail, status=status, retryable=True)
        # 501 is the server's word that it does not do this at all: asking again won't help.
        error = ProviderError("server" if status == 501 else "client", detail, status=status)
        error.item_cause = status in ITEM_STATUSES and _names_item_cause(body)
        raise error

    async def _send_request(
        self,
        client: httpx.AsyncClient,
        pool: ConnectionPool | None,
        url: httpx.URL,
        headers: dict[str, str],
        content: bytes,
        timeout: httpx.Timeout,
        max_bytes: int,
        method: str,
    ) -> tuple[httpx.Response, bytes]:
        """The response to an ``httpx.Request`` (through the pool, or the client where a
        proxy may be mounted), and its decoded body, at most ``max_bytes`` of it."""
        # The request is built here, with the client's default headers merged once per
        # distinct header set, rather than by ``client.post`` on every call.
        request = httpx.Request(
            method,
            url,
            headers=self._headers(headers),
            content=content,
            extensions={
                "timeout": self._timeout_dicts[id(timeout)],
                MAX_BODY_EXTENSION: max_bytes,
            },
        )
        response = await (
            pool.handle_async_request(request)
            if pool is not None
            else client.send(request, stream=True)
        )
        try:
            stream = response.stream
            if isinstance(stream, _Slices) and "content-encoding" not in response.headers:
                # Read whole by the pool and not encoded: the bytes are the body.
                body = stream.body
                if len(body) > max_bytes:
                    raise ResponseTooLarge(max_bytes, response.status_code, request=request)
            else:
                body = await read_body(response, max_bytes)
        finally:
            await response.aclose()
            # httpx binds the stream to its response, each referring to the other: a
            # cycle of some twenty objects a request that only the collector frees, in
            # pauses of a tenth of a second during a large fetch. Closed, the stream is
            # not read again; without it the response is freed when it is dropped.
            response.stream = _CLOSED
        return response, body

    def _raw_head(
        self, method: str, url: httpx.URL, headers: dict[str, str]
    ) -> tuple[bytes, bytes, bool] | None:
        """The head of a request with this method, URL and headers, as ``request_head``
        writes an ``httpx.Request``'s, cut around its Content-Length value; and whether it
        asks to close the connection. Made once per distinct head; None where httpx's head
        has no single Content-Length to fill in."""
        key = (method, id(url), tuple(headers.items()))
        if key in self._heads:
            return self._heads[key]
        if len(self._heads) >= MAX_HEADER_SETS:
            self._heads.clear()  # signed requests: every attempt's set is new
        # ``url`` lives as long as this layer (``_url``), so its id names it.
        template = httpx.Request(method, url, headers=self._headers(headers), content=b"-")
        head, close, chunked = request_head(template)
        before, mark, after = head.partition(b"\r\nContent-Length: 1\r\n")
        cut = None
        if mark and not chunked and b"\r\ncontent-length:" not in (before + after).lower():
            cut = (before + b"\r\nContent-Length: ", b"\r\n" + after, close)
        self._heads[key] = cut
        return cut

    def retry_delay(self, exc: ProviderError, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (its ``Retry-After``, or
        the backoff)."""
        if exc.retry_after is not None:
            return min(exc.retry_after, MAX_RETRY_AFTER_S)
        return self._backoff.delay(attempt)


NOT_SENT = frozenset({"refused", "unreachable"})
"""The kinds of errors of requests the pin's state kept from being sent."""


def refuses_pin(exc: ProviderError) -> bool:
    """Whether ``exc`` answers every request of the pin alike, not just this one: a status
    in ``PIN_STATUSES``, or no quota left."""
    return exc.kind == "quota" or (exc.status in PIN_STATUSES and exc.kind not in NOT_SENT)


class _PinState:
    """What one pin's answers so far say about its next request: it goes, it waits its turn
    (the pin is in doubt), or it is not sent (the pin is refused or unreachable).

    Connection failures in a row open the breaker: any answer from the server (a 200, a
    429, a 500) closes it again. A refusal (``refuses_pin``, or a row of ``ITEM_STATUSES``
    as ``REFUSED_AFTER`` says) is for good. Either way the pin stays stopped for the rest of
    the run: a server that refused five connections in a row is not coming back within it,
    and a wrong key does not become right.
    """

    def __init__(self, pin_id: str) -> None:
        self.pin_id = pin_id
        self.failures = 0
        self.refusal: tuple[str, int | None] | None = None
        """Once the pin is refused: the message and status of every model request not sent."""
        self.answered = False
        """A model request of the pin succeeded in this run."""
        self.row_status: int | None = None
        self.row: set[bytes] = set()
        """The different bodies the same 400 or 422 answered in a row (none answered yet)."""
        self.first_over = False
        self._alone = False
        """A request is out alone while the pin is in doubt."""
        self._changed: asyncio.Future[None] | None = None

    @property
    def in_doubt(self) -> bool:
        return not self.first_over or bool(self.row)

    @property
    def stopped(self) -> bool:
        return self.refusal is not None or self.failures >= UNREACHABLE_AFTER

    async def admit(self) -> bool:
        """Wait until a model request may go; whether it goes alone (the pin in doubt)."""
        while self.in_doubt and not self.stopped:
            if not self._alone:
                self._alone = True
                return True
            if self._changed is None:
                self._changed = asyncio.get_running_loop().create_future()
            # Shielded: a waiter cancelled (Ctrl-C) must not cancel the others' future.
            await asyncio.shield(self._changed)
        return False

    def went_alone(self, *, sent: bool) -> None:
        """The request that went alone is over, however it ended (``sent``: it was sent)."""
        self._alone = False
        self.first_over = self.first_over or sent
        self._wake()

    def _wake(self) -> None:
        changed, self._changed = self._changed, None
        if changed is not None and not changed.done():
            changed.set_result(None)

    def record(self, exc: ProviderError | None, body: bytes | None) -> None:
        """One attempt's outcome (None: a success). ``body`` is the model request's; for
        another API call (None) only whether a connection failed counts."""
        failed = exc is not None and exc.kind == "connection"
        if self.failures < UNREACHABLE_AFTER:
            self.failures = self.failures + 1 if failed else 0
        if body is None or failed or self.refusal is not None:
            return
        if exc is None:
            self.answered = True
            self._end_row()
        elif refuses_pin(exc):
            first = not self.first_over
            self._refuse(exc, "its first request" if first else "a request for the whole pin")
        elif exc.status in ITEM_STATUSES and not self.answered and not exc.item_cause:
            if exc.status != self.row_status:
                self.row_status, self.row = exc.status, set()
            self.row.add(body)
            if len(self.row) >= REFUSED_AFTER:
                self._refuse(exc, f"{REFUSED_AFTER} different requests in a row")
        elif exc.status is not None:
            self._end_row()  # another answer: the row, if any, is broken

    def _end_row(self) -> None:
        if self.row:
            self.row_status, self.row = None, set()
            self._wake()

    def _refuse(self, exc: ProviderError, what: str) -> None:
        status = f" (HTTP {exc.status})" if exc.status is not None else ""
        # The answer's message is already redacted and cut short (``_error_detail``).
        self.refusal = f"not sent: {self.pin_id} refused {what}{status}: {exc}", exc.status
        self._wake()

    def check(self, url: str | httpx.URL, model_request: bool) -> None:
        """Raise, unsent, if the pin is unreachable, or refused and this is a model request."""
        if self.failures >= UNREACHABLE_AFTER:
            raise ProviderError(
                "unreachable",
                f"pin {self.pin_id}: cannot connect to {url}: is the server running? (not "
                f"sent: {UNREACHABLE_AFTER} connections in a row failed)",
            )
        if model_request and self.refusal is not None:
            message, status = self.refusal
            raise ProviderError("refused", message, status=status)


class ResponseTooLarge(httpx.TransportError):
    """A response body longer than the request allows: it is not read any further."""

    def __init__(self, limit: int, status: int, *, request: httpx.Request | None = None) -> None:
        super().__init__(f"the response body is longer than {limit:,} bytes", request=request)
        self.status = status


MAX_BODY_EXTENSION = "evalreg.max_body_bytes"
"""The request extension that tells ``ConnectionPool`` the longest body to read."""


async def read_body(response: httpx.Response, max_bytes: int) -> bytes:
    """The decoded body of a streamed ``response``, refused once past ``max_bytes``.

    Decoding (gzip, deflate) happens piece by piece as the body arrives, so a small body
    that decompresses to gigabytes is stopped like a long one.
    """
    pieces = []
    size = 0
    async for piece in response.aiter_bytes():
        size += len(piece)
        if size > max_bytes:
            raise ResponseTooLarge(max_bytes, response.status_code)
        pieces.append(piece)
    return b"".join(pieces)


def _json_of(body: bytes) -> Any:
    try:
        # Refusing NaN and infinities here keeps them out of the parsed usage and the store.
        return loads_finite(body.decode("utf-8-sig"))
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep to read
        raise ProviderError(
            "malformed", f"response is not JSON: {exc}", status=200, retryable=True
        ) from None


def _error_detail(response: httpx.Response, body: bytes) -> str:
    """A short, single-line description of an error response (the body is untrusted).

    The message is ``error.message`` (OpenAI, Anthropic, Google) or a top-level ``message``
    (AWS); the error's type leads it where the API names one apart from the status: AWS's
    ``x-amzn-ErrorType`` header or ``__type``, Google's ``error.status``.
    """
    message = kind = None
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict):
            message, kind = err.get("message"), err.get("status")
        else:
            message, kind = data.get("message") or data.get("Message"), data.get("__type")
    kind = response.headers.get("x-amzn-errortype") or kind
    text = str(message) if message else response.reason_phrase or "error"
    if isinstance(kind, str) and kind:
        # "ThrottlingException:http://internal.amazon.com/..." or "...#ThrottlingException"
        text = f"{kind.split(':', 1)[0].rpartition('#')[2]}: {text}"
    # Redacted before it is cut: a cut through a quoted key would leave a part of it.
    text = redact(" ".join(text.split()))
    return f"HTTP {response.status_code}: {text[:200]}"


_QUOTA_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached"})
_QUOTA_MESSAGES = re.compile(r"credit balance is too low", re.IGNORECASE)
_ITEM_CODES = frozenset(
    {
        "content_filter",
        "context_length_exceeded",
        "string_above_max_length",
        "content_policy_violation",
    }
)
_ITEM_MESSAGES = re.compile(
    r"prompt is too long|input is too long|exceeds the maximum number of tokens|"
    r"maximum context length|content management policy|flagged as potentially violating|"
    r"blocked by content filtering|blocked by .*safety",
    re.IGNORECASE,
)


def _names_item_cause(body: bytes) -> bool:
    """Whether a 400 or 422 names a cause that lies in the request's content (a content
    filter, a prompt too long for the model) by its code or its well-known message: such a
    refusal is the item's, however many come in a row, so a run never stops a pin for its
    first items being long or filtered (and stops again for them on every later run)."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return False
    err = data.get("error") if isinstance(data, dict) else None
    fields = err if isinstance(err, dict) else data if isinstance(data, dict) else {}
    code, message = fields.get("code"), fields.get("message") or fields.get("Message")
    if isinstance(code, str) and code in _ITEM_CODES:
        return True
    return isinstance(message, str) and _ITEM_MESSAGES.search(message) is not None


def _quota_exhausted(body: bytes) -> bool:
    """Whether a 429 or 400 says the account's quota, budget or credit is spent (OpenAI's
    ``insufficient_quota``, a 429; Anthropic's "credit balance is too low", a 400), rather
    than asking the client to slow down or refusing one request."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return False
    err = data.get("error") if isinstance(data, dict) else None
    if not isinstance(err, dict):
        return False
    message = err.get("message")
    if isinstance(message, str) and _QUOTA_MESSAGES.search(message):
        return True
    return err.get("code") in _QUOTA_CODES or err.get("type") in _QUOTA_CODES


_USERINFO = re.compile(r"(?<=//)[^/@\s]*@")


def _connection_detail(exc: httpx.TransportError) -> str:
    """What went wrong on the way to the server, without a proxy URL's credentials."""
    text = f"{type(exc).__name__}: {exc}"
    if "CERTIFICATE_VERIFY_FAILED" in text:
        text = (
            f"TLS certificate verification failed: {exc}; trust the server's CA with "
            "SSL_CERT_FILE or a ca_bundle (the pin's limits or the registry's network settings)"
        )
    return redact(_USERINFO.sub("", text))


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait from ``retry-after-ms``, ``Retry-After`` (seconds or HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


# ---------------------------------------------------------------- the connection pool
MAX_HEAD_BYTES = 1 << 20
"""Longest response head (status line and headers) accepted."""
MAX_LINE_BYTES = 64 << 10
"""Longest chunk-size or trailer line accepted."""
_DEFAULT_PORTS = {b"http": 80, b"https": 443}
_NO_BODY_STATUS = frozenset({204, 304})
Origin = tuple[bytes, bytes, int]


@dataclass(slots=True)
class Answer:
    """A response read whole by ``ConnectionPool.exchange``."""

    version: bytes
    status: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes

    @property
    def encoded(self) -> bool:
        """Whether the body is content-encoded (compressed): not yet the bytes meant."""
        return any(name.lower() == b"content-encoding" for name, _ in self.headers)


async def _response_of(answer: Answer, max_bytes: int) -> tuple[httpx.Response, bytes]:
    """``answer`` as an ``httpx.Response``, and its body decoded, at most ``max_bytes`` of
    it."""
    response = httpx.Response(
        answer.status,
        headers=answer.headers,
        stream=_Slices(answer.body),
        extensions={"http_version": answer.version, "reason_phrase": answer.reason},
    )
    try:
        body = await read_body(response, max_bytes) if answer.encoded else answer.body
    finally:
        await response.aclose()
        response.stream = _CLOSED
    return response, body


def request_head(request: httpx.Request) -> tuple[bytes, bool, bool]:
    """``request``'s head as HTTP/1.1 writes it (request line, headers, blank line); whether
    it asks to close the connection after it; whether its body is sent chunked."""
    raw = request.headers.raw
    lines = [b"%b %b HTTP/1.1" % (request.method.encode("ascii"), request.url.raw_path)]
    chunked = close = False
    for name, value in raw:
        lines.append(name + b": " + value)
        lower = name.lower()
        if lower == b"transfer-encoding":
            chunked = value.rsplit(b",", 1)[-1].strip().lower() == b"chunked"
        elif lower == b"connection":
            close = b"close" in value.lower()
    lines += (b"", b"")
    head = b"\r\n".join(lines)
    # Every CR and LF must be a line end written here: one in a name or value would let it
    # smuggle a header (or a request) onto the wire.
    ends = len(raw) + 2
    if head.count(b"\n") != ends or head.count(b"\r") != ends or b"\0" in head:
        raise httpx.LocalProtocolError(
            "a header name or value contains CR, LF or NUL", request=request
        )
    for name, value in raw:
        if _REQUEST_NAME.fullmatch(name) is None or value[:1] in _SPACES or value[-1:] in _SPACES:
            # As h11 refuses them: a name "x-a:b" is sent as header x-a, and a value read
            # from the environment with a stray space or tab would be sent with it.
            raise httpx.LocalProtocolError(
                f"header {name[:40]!r}: a name must be a token, and a value cannot begin or "
                "end with a space or tab",
                request=request,
            )
    return head, close, chunked


_TOKEN = rb"[-!#$%&'*+.^_`|~0-9A-Za-z]+"
"""A header name (RFC 9110, 5.6.2)."""
_REQUEST_NAME = re.compile(_TOKEN)
_SPACES = (b" ", b"\t")


class ConnectionPool(httpx.AsyncBaseTransport):
    """An ``httpx`` transport: HTTP/1.1 over keep-alive connections, kept per origin.

    Taking and returning a connection costs the same however many are open: idle
    connections wait in a last-in-first-out stack per origin. One is reused only while its
    socket has nothing to read: a server that closes after answering, without saying so,
    has sent its end (or a TLS alert) before the event loop has told the connection (as
    ``httpcore`` does, one ``poll`` with no wait).

    Response bodies are read whole before the response is returned (the APIs evalreg
    speaks answer in one body; it never asks for a stream), up to the length a request's
    ``MAX_BODY_EXTENSION`` allows: a longer body raises ``ResponseTooLarge`` as soon as its
    length is known or its bytes exceed it. ``max_connections`` bounds the
    requests in flight (a request waits for a slot up to the pool timeout);
    ``max_idle`` bounds the connections kept open between requests; an idle connection
    older than ``keepalive_expiry`` seconds is closed rather than reused.
    """

    def __init__(
        self,
        *,
        max_connections: int = 512,
        max_idle: int | None = None,
        keepalive_expiry: float = 5.0,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        self._slots = max_connections
        self._max_idle = max_connections if max_idle is None else max_idle
        self._keepalive_expiry = keepalive_expiry
        self._verify = verify
        self._ssl: ssl.SSLContext | None = None
        self._idle: dict[Origin, list[_Connection]] = {}
        self._idle_count = 0
        self._semaphore: asyncio.Semaphore | None = None
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        head, close, chunked = request_head(request)
        stream = request.stream
        body: bytes | AsyncIterable[bytes]
        if isinstance(stream, httpx.ByteStream):
            body = request.content
        elif isinstance(stream, httpx.AsyncByteStream):
            body = stream
        else:
            raise RuntimeError("an async transport cannot send a synchronous request body")
        answer = await self.exchange(
            request.url,
            request.method,
            head,
            body,
            request.extensions.get("timeout") or {},
            request.extensions.get(MAX_BODY_EXTENSION),
            close=close,
            chunked=chunked,
            request=request,
        )
        return httpx.Response(
            answer.status,
            headers=answer.headers,
            stream=_Slices(answer.body),
            extensions={"http_version": answer.version, "reason_phrase": answer.reason},
            request=request,
        )

    async def exchange(
        self,
        url: httpx.URL,
        method: str,
        head: bytes,
        body: bytes | AsyncIterable[bytes],
        timeouts: dict[str, float | None],
        limit: int | None,
        *,
        close: bool = False,
        chunked: bool = False,
        request: httpx.Request | None = None,
    ) -> Answer:
        """Send a request already written out (``head``, from ``request_head`` or made as
        it makes them, then ``body``) to ``url``'s origin and read its whole answer, at most
        ``limit`` bytes of body. ``handle_async_request`` is this, for an ``httpx.Request``;
        a caller that sends many requests alike writes their heads itself. ``request``, when
        there is one, is named by the errors raised."""
        scheme = url.raw_scheme
        if scheme not in _DEFAULT_PORTS:
            raise httpx.UnsupportedProtocol(
                f"Request URL has an unsupported protocol '{scheme.decode()}://'.", request=request
            )
        if self._closed:
            raise RuntimeError("the connection pool is closed")
        origin = (scheme, url.raw_host, url.port or _DEFAULT_PORTS[scheme])
        semaphore = self._semaphore
        if semaphore is None:
            semaphore = self._semaphore = asyncio.Semaphore(self._slots)
        if semaphore.locked():
            try:
                async with asyncio.timeout(timeouts.get("pool")):
                    await semaphore.acquire()
            except TimeoutError:
                raise httpx.PoolTimeout("no connection slot became free", request=request) from None
        else:
            await semaphore.acquire()
        try:
            connection = self._checkout(origin)
            if connection is None:
                connection = await self._connect(origin, request, timeouts.get("connect"))
            try:
                answer, reusable = await connection.exchange(
                    head, body, method, limit, timeouts, chunked=chunked, request=request
                )
            except BaseException:
                connection.close()
                raise
            if reusable and not close:
                self._checkin(origin, connection)
            else:
                connection.close()
            return answer
        finally:
            semaphore.release()

    def _checkout(self, origin: Origin) -> _Connection | None:
        stack = self._idle.get(origin)
        if not stack:
            return None
        now = time.monotonic()
        while stack:
            connection = stack.pop()
            self._idle_count -= 1
            if (
                connection.usable
                and now - connection.idle_since < self._keepalive_expiry
                and not connection.readable()
            ):
                return connection
            connection.close()
        return None

    def _checkin(self, origin: Origin, connection: _Connection) -> None:
        if self._closed or self._idle_count >= self._max_idle:
            connection.close()
            return
        connection.idle_since = time.monotonic()
        self._idle.setdefault(origin, []).append(connection)
        self._idle_count += 1

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            # Loading the CA bundle takes tens of milliseconds: only for an https origin.
            self._ssl = httpx.create_ssl_context(verify=self._verify)
            self._ssl.set_alpn_protocols(["http/1.1"])
        return self._ssl

    async def _connect(
        self, origin: Origin, request: httpx.Request | None, timeout: float | None
    ) -> _Connection:
        scheme, host, port = origin
        loop = asyncio.get_running_loop()
        hostname = host.decode("ascii")
        tls = self._ssl_context() if scheme == b"https" else None
        try:
            async with asyncio.timeout(timeout):
                _transport, connection = await loop.create_connection(
                    lambda: _Connection(loop),
                    hostname,
                    port,
                    ssl=tls,
                    server_hostname=hostname if tls is not None else None,
                )
        except TimeoutError:
            raise httpx.ConnectTimeout(
                f"connecting to {hostname}:{port}", request=request
            ) from None
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from None
        return connection

    async def aclose(self) -> None:
        self._closed = True
        for stack in self._idle.values():
            for connection in stack:
                connection.close()
        self._idle.clear()
        self._idle_count = 0


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 client connection: writes a request, reads its response."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._waiter: asyncio.Future[None] | None = None
        self._drain: asyncio.Future[None] | None = None
        self._eof = False
        self._lost: BaseException | None = None
        self._paused = False
        self._busy = False
        self.usable = True
        """False once the server closed the connection or it can carry no further request."""
        self.idle_since = 0.0

    # -- asyncio callbacks ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        if not self._busy:
            self.usable = False  # bytes nobody asked for: the connection is out of step
        self._buffer += data
        self._wake()

    def eof_received(self) -> bool:
        self._eof = True
        self.usable = False
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        self.usable = False
        self._lost = exc
        self._wake()
        drain = self._drain
        if drain is not None and not drain.done():
            drain.set_result(None)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        drain = self._drain
        if drain is not None and not drain.done():
            drain.set_result(None)

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def close(self) -> None:
        self.usable = False
        if self._transport is not None:
            self._transport.close()

    def readable(self) -> bool:
        """Whether the idle connection's socket has something to read (the server's end,
        or bytes nobody asked for) that the event loop has not yet handed on."""
        sock = self._transport.get_extra_info("socket") if self._transport else None
        if sock is None:
            return True
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLIN)
        return bool(poller.poll(0))

    # -- one request ---------------------------------------------------------------------
    async def exchange(
        self,
        head: bytes,
        body: bytes | AsyncIterable[bytes],
        method: str,
        limit: int | None,
        timeouts: dict[str, float | None],
        *,
        chunked: bool = False,
        request: httpx.Request | None = None,
    ) -> tuple[Answer, bool]:
        """Write a request and read its whole answer; also whether the connection can
        carry another request."""
        self._busy = True
        try:
            await self._write(head, body, chunked, timeouts.get("write"), request)
            return await self._read_response(method, limit, timeouts.get("read"), request)
        finally:
            self._busy = False

    async def _write(
        self,
        head: bytes,
        body: bytes | AsyncIterable[bytes],
        chunked: bool,
        timeout: float | None,
        request: httpx.Request | None,
    ) -> None:
        transport = self._transport
        if transport is None or self._eof:
            raise httpx.WriteError("the connection is closed", request=request)
        if isinstance(body, bytes):
            transport.write(head + body)
        else:
            transport.write(head)
            async for chunk in body:
                if chunk:
                    transport.write(b"%x\r\n%b\r\n" % (len(chunk), chunk) if chunked else chunk)
                    await self._drained(request, timeout)
            if chunked:
                transport.write(b"0\r\n\r\n")
        await self._drained(request, timeout)

    async def _drained(self, request: httpx.Request | None, timeout: float | None) -> None:
        if not self._paused:
            return
        if self._lost is not None or self._eof:
            raise httpx.WriteError("the server closed the connection", request=request)
        self._drain = self._loop.create_future()
        try:
            async with asyncio.timeout(timeout):
                await self._drain
        except TimeoutError:
            raise httpx.WriteTimeout("writing the request timed out", request=request) from None
        finally:
            self._drain = None

    async def _more(self, request: httpx.Request | None, timeout: float | None, what: str) -> None:
        """Wait for more bytes; raise if the server closed the connection instead."""
        if self._eof:
            if isinstance(self._lost, OSError):
                raise httpx.ReadError(f"{what}: {self._lost}", request=request)
            raise httpx.RemoteProtocolError(
                f"the server closed the connection {what}", request=request
            )
        waiter = self._waiter = self._loop.create_future()
        expire = self._loop.call_later(timeout, _expire, waiter) if timeout is not None else None
        try:
            await waiter
        except TimeoutError:
            raise httpx.ReadTimeout(f"no data {what} for {timeout}s", request=request) from None
        finally:
            self._waiter = None
            if expire is not None:
                expire.cancel()

    async def _read_head(self, request: httpx.Request | None, timeout: float | None) -> bytes:
        buffer = self._buffer
        start = 0
        while True:
            # A blank line ends the head; a bare LF ends a line too (RFC 9112, 2.2).
            end = _HEAD_END.search(buffer, start)
            if end is not None:
                head = bytes(buffer[: end.start()])
                del buffer[: end.end()]
                return head
            if len(buffer) > MAX_HEAD_BYTES:
                raise httpx.RemoteProtocolError("response head too long", request=request)
            start = max(0, len(buffer) - 3)
            await self._more(
                request,
                timeout,
                "before the response" if not buffer else "inside the response head",
            )

    async def _read_line(self, request: httpx.Request | None, timeout: float | None) -> bytes:
        buffer = self._buffer
        start = 0
        while True:
            end = buffer.find(b"\r\n", start)
            if end >= 0:
                line = bytes(buffer[:end])
                del buffer[: end + 2]
                return line
            if len(buffer) > MAX_LINE_BYTES:
                raise httpx.RemoteProtocolError("chunk line too long", request=request)
            start = max(0, len(buffer) - 1)
            await self._more(request, timeout, "inside a chunked body")

    async def _read_exactly(
        self, n: int, request: httpx.Request | None, timeout: float | None
    ) -> bytes:
        buffer = self._buffer
        while len(buffer) < n:
            await self._more(request, timeout, "before the body was complete")
        data = bytes(buffer[:n])
        del buffer[:n]
        return data

    async def _read_to_close(
        self, request: httpx.Request | None, timeout: float | None, limit: int | None, status: int
    ) -> bytes:
        while not self._eof:
            if limit is not None and len(self._buffer) > limit:
                raise ResponseTooLarge(limit, status, request=request)
            waiter = self._waiter = self._loop.create_future()
            expire = (
                self._loop.call_later(timeout, _expire, waiter) if timeout is not None else None
            )
            try:
                await waiter
            except TimeoutError:
                raise httpx.ReadTimeout(f"no data for {timeout}s", request=request) from None
            finally:
                self._waiter = None
                if expire is not None:
                    expire.cancel()
        if isinstance(self._lost, OSError):
            raise httpx.ReadError(str(self._lost), request=request)
        data = bytes(self._buffer)
        self._buffer.clear()
        return data

    async def _read_chunked(
        self, request: httpx.Request | None, timeout: float | None, limit: int | None, status: int
    ) -> bytes:
        chunks: list[bytes] = []
        total = 0
        while True:
            line = await self._read_line(request, timeout)
            size_text = line.split(b";", 1)[0].rstrip(b" \t")
            if _CHUNK_SIZE.fullmatch(size_text) is None:
                raise httpx.RemoteProtocolError(
                    f"invalid chunk size {size_text[:40]!r}", request=request
                )
            size = int(size_text, 16)
            if size == 0:
                while await self._read_line(request, timeout):  # trailers, ignored
                    pass
                return b"".join(chunks)
            total += size
            if limit is not None and total > limit:
                raise ResponseTooLarge(limit, status, request=request)
            chunks.append(await self._read_exactly(size, request, timeout))
            if await self._read_exactly(2, request, timeout) != b"\r\n":
                raise httpx.RemoteProtocolError("invalid chunk terminator", request=request)

    async def _read_response(
        self, method: str, limit: int | None, timeout: float | None, request: httpx.Request | None
    ) -> tuple[Answer, bool]:
        while True:
            head = await self._read_head(request, timeout)
            version, status, reason, headers = _parse_head(head, request)
            if not 100 <= status < 200 or status == 101:
                break  # an informational response (100 Continue, 103 Early Hints) is skipped
        if status == 101:
            raise httpx.RemoteProtocolError("unexpected protocol switch", request=request)
        keep_alive = version == b"HTTP/1.1"
        lengths: set[bytes] = set()
        codings: list[bytes] = []
        for name, value in headers:
            lower = name.lower()
            if lower == b"content-length":
                # "11, 11" is one length, sent twice (RFC 9110, 8.6)
                lengths.update(v.strip(b" \t") for v in value.split(b","))
            elif lower == b"transfer-encoding":
                codings += (c.strip(b" \t").lower() for c in value.split(b","))
            elif lower == b"connection":
                tokens = {t.strip().lower() for t in value.split(b",")}
                if b"close" in tokens:
                    keep_alive = False
                elif b"keep-alive" in tokens and version == b"HTTP/1.0":
                    keep_alive = True
        if method == "HEAD" or status in _NO_BODY_STATUS:
            body = b""
        elif codings:
            # As h11: chunked alone is read; a body coded otherwise cannot be told apart
            # from what follows it, nor decoded here.
            if codings != [b"chunked"]:
                raise httpx.RemoteProtocolError(
                    f"unsupported Transfer-Encoding {b', '.join(codings)[:80]!r}", request=request
                )
            body = await self._read_chunked(request, timeout, limit, status)
        elif lengths:
            if len(lengths) > 1:
                raise httpx.RemoteProtocolError("conflicting Content-Length", request=request)
            text = lengths.pop()
            if not text.isdigit():
                raise httpx.RemoteProtocolError("invalid Content-Length", request=request)
            if limit is not None and int(text) > limit:
                raise ResponseTooLarge(limit, status, request=request)
            body = await self._read_exactly(int(text), request, timeout)
        else:
            body = await self._read_to_close(request, timeout, limit, status)
            keep_alive = False
        if self._buffer or self._eof:
            keep_alive = False  # trailing bytes, or the server is already gone
        return Answer(version, status, reason, headers, body), keep_alive


class _Slices(httpx.AsyncByteStream):
    """A body read whole, handed on in slices: a compressed one is then decoded a slice at a
    time, and a reader that stops at a length stops its decompression there too."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def __aiter__(self) -> AsyncIterator[bytes]:
        body = self.body
        if len(body) <= _SLICE:
            yield body
            return
        for start in range(0, len(body), _SLICE):
            yield body[start : start + _SLICE]


_SLICE = 16 << 10


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


def _parse_head(
    head: bytes, request: httpx.Request | None
) -> tuple[bytes, int, bytes, list[tuple[bytes, bytes]]]:
    """(version, status, reason, headers) of a response head; malformed heads raise.

    Read as h11 reads one: a line ends at CRLF or a bare LF, and a line that begins with a
    space or a tab continues the header before it (obsolete folding, joined by a space);
    a header's name is a token, and its value holds no NUL, CR, LF, FF or VT."""
    lines = _LINE_END.split(head.lstrip(b"\r\n"))
    version, _, rest = lines[0].partition(b" ")
    code, _, reason = rest.partition(b" ")
    if version not in (b"HTTP/1.1", b"HTTP/1.0") or len(code) != 3 or not code.isdigit():
        raise httpx.RemoteProtocolError(f"malformed status line {lines[0][:80]!r}", request=request)
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        if line[:1] in (b" ", b"\t") and headers and _FOLDED.fullmatch(line):
            name, value = headers[-1]
            folded = line.strip(b" \t")
            headers[-1] = (name, value + b" " + folded if value and folded else value or folded)
            continue
        field = _FIELD.fullmatch(line)
        if field is None:
            raise httpx.RemoteProtocolError(f"malformed header line {line[:80]!r}", request=request)
        headers.append((field[1], field[2]))
    return version, int(code), reason, headers


_HEAD_END = re.compile(rb"\r?\n\r?\n")
_LINE_END = re.compile(rb"\r?\n")
_FIELD = re.compile(rb"(" + _TOKEN + rb"):[ \t]*([^\x00\r\n\f\v]*?)[ \t]*")
"""A header line: a token, a colon, a value (without the spaces around it)."""
_FOLDED = re.compile(rb"[ \t]+[^\x00\r\n\f\v]*")
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")
