"""Real loopback HTTP servers speaking Amazon Bedrock's Converse API and Google's
``generateContent`` (Gemini API and Vertex AI), for tests.

``BedrockServer`` answers ``POST /model/{modelId}/converse`` (and ``GET /foundation-models``
and ``/inference-profiles``, its ``models`` and ``profiles``) and checks every request's
SigV4 signature the way AWS does: it recomputes it with botocore from the request it
received and the credentials it was given, and answers a mismatch with 403
``InvalidSignatureException`` (and a signature older than ``max_age_s`` with 403
``Signature expired``), so a test proves the client signs the exact bytes it sends, and signs
each retry afresh. With ``api_key`` set it takes ``Authorization: Bearer <key>`` instead.

``GeminiServer`` answers ``POST /v1beta/models/{model}:generateContent`` (the key in
``x-goog-api-key``) and ``POST /v1/projects/{p}/locations/{l}/publishers/google/models/
{model}:generateContent`` (a bearer token it issued from ``POST /token``, an OAuth token
endpoint ``google-auth`` refreshes credentials against). It also speaks the Gemini API's
batch mode with inlined requests: ``POST /v1beta/models/{model}:batchGenerateContent``
answers a long-running operation ``batches/{id}``, ``GET /v1beta/batches/{id}`` polls it
(ending on the poll after ``batch_polls``, each request answered as ``generateContent``
would answer it, the responder and faults included) and ``GET /v1beta/batches`` lists them.
``batch_end_state`` makes the next batch end ``EXPIRED``, ``FAILED`` or ``CANCELLED``
without results; requests whose raw body contains a string in ``batch_errors_matching``
answer an ``error`` entry; ``batch_without_keys`` leaves out the entries' ``metadata``;
``hold_batch("create")`` and ``hold_batch("results")`` hold answers back until released
(the batch exists, or its results are ready, meanwhile). ``batch_requests`` lists every
request submitted in a batch (``custom_id``: its metadata key), ``batch_answered`` those
answered: what was bought in batches, beside the live ``generateContent`` requests in
``requests``.

Faults, in the style of ``llm_server.LLMServer``: ``fail_next(name, times)`` and
``fail_matching(substring, name, times)`` (a substring of the raw body), the queue first;
``error_text``, when set, writes the message of a fault's error from the request.
Each server's ``FAULTS`` names the error shapes of its API (throttling, quota, context
length, auth, content filters). Everything received is recorded in ``requests``.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal
from urllib.parse import parse_qs, unquote


@dataclass
class Request:
    """One request as received: lower-case header names, the parsed JSON body, the raw bytes."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes
    fault: str | None = None
    custom_id: str | None = None
    """For a request inside a batch: the key it was submitted under."""


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str]


def estimate_tokens(text: str) -> int:
    return max(1, len(text.split()) * 4 // 3)


def echo_text(prompt: str) -> str:
    """The reply when no responder is set: fixed by the prompt."""
    n = int.from_bytes(hashlib.sha256(prompt.encode()).digest()[:4], "big") % 1000
    return json.dumps({"echo": prompt[-40:], "n": n})


class Hold:
    """Answers held back by ``GeminiServer.hold_batch``: ``waiting`` is how many wait now;
    ``release`` lets them (and every later one) be sent."""

    def __init__(self, after: int) -> None:
        self._after = after
        self._answered = 0
        self._lock = threading.Lock()
        self._event = threading.Event()
        #: Requests held now (received, their answer not sent).
        self.waiting = 0

    def wait_turn(self) -> None:
        """Return at once for the first ``after`` callers and once released; else wait."""
        with self._lock:
            if self._event.is_set() or self._answered < self._after:
                self._answered += 1
                return
            self.waiting += 1
        self._event.wait()
        with self._lock:
            self.waiting -= 1

    def release(self) -> None:
        """Send the held answers now, and every later one at once; idempotent."""
        self._event.set()

    def __enter__(self) -> Hold:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class _Server:
    """A threaded loopback HTTP/1.1 server with a fault queue; subclasses speak a protocol."""

    FAULTS: frozenset[str] = frozenset()

    def __init__(self, responder: Callable[[Request], str] | None = None) -> None:
        self.responder = responder
        #: Tool calls to answer with, from the request (``[{"name", "arguments"}]``);
        #: an empty list answers with text.
        self.tool_caller: Callable[[Request], list[dict[str, Any]]] | None = None
        #: Writes the message of every injected error, from the request (a gateway that
        #: quotes the credentials it was sent, say); None keeps the API's own words.
        self.error_text: Callable[[Request], str] | None = None
        self.requests: list[Request] = []
        self._next: deque[list[Any]] = deque()
        self._matching: list[list[Any]] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        #: Holds on answers (``GeminiServer.hold_batch``), released when the server stops.
        self._holds: list[Hold] = []

    # -- lifecycle -----------------------------------------------------------------------
    @property
    def root_url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> _Server:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                request = Request(
                    "POST",
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                    raw,
                )
                self._reply(server._handle(request))

            def do_GET(self) -> None:
                headers = {k.lower(): v for k, v in self.headers.items()}
                self._reply(server._handle(Request("GET", self.path, headers, None, b"")))

            def _reply(self, reply: Reply) -> None:
                data = json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (a timeout under test)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        for hold in self._holds:
            hold.release()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- faults --------------------------------------------------------------------------
    def fail_next(self, fault: str, times: int = 1, **opts: float) -> None:
        self._check(fault)
        with self._lock:
            self._next.append([fault, times, opts])

    def fail_matching(
        self, substring: str, fault: str, times: int | None = None, **opts: float
    ) -> None:
        self._check(fault)
        with self._lock:
            self._matching.append([substring, fault, times, opts])

    def _check(self, fault: str) -> None:
        if fault not in self.FAULTS:
            raise ValueError(f"unknown fault {fault!r}; expected one of {sorted(self.FAULTS)}")

    def _draw(self, request: Request) -> tuple[str, dict[str, float]] | None:
        with self._lock:
            if self._next:
                rule = self._next[0]
                rule[1] -= 1
                if rule[1] <= 0:
                    self._next.popleft()
                return rule[0], rule[2]
            text = request.raw.decode("utf-8", "replace")
            for rule in self._matching:
                if rule[0] in text and (rule[2] is None or rule[2] > 0):
                    if rule[2] is not None:
                        rule[2] -= 1
                    return rule[1], rule[3]
        return None

    def _handle(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
        return self.answer(request)

    def count(self, predicate: Callable[[Request], bool] | None = None) -> int:
        """Number of requests received, or of those for which ``predicate`` is true."""
        with self._lock:
            snapshot = list(self.requests)
        return sum(1 for request in snapshot if predicate is None or predicate(request))

    def answer(self, request: Request) -> Reply:
        raise NotImplementedError

    def _text(self, request: Request, prompt: str) -> str:
        return self.responder(request) if self.responder is not None else echo_text(prompt)


# ------------------------------------------------------------------ Bedrock
_CONVERSE = re.compile(r"^/model/(?P<model>[^/]+)/converse$")
_AUTH = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/"
    r"(?P<service>[^/]+)/aws4_request, ?SignedHeaders=(?P<signed>[^,]+), ?"
    r"Signature=(?P<sig>[0-9a-f]{64})$"
)


def aws_error(status: int, kind: str, message: str) -> Reply:
    """An AWS JSON-protocol error: the type in ``x-amzn-ErrorType``, the message in the body."""
    return Reply(status, {"message": message}, {"x-amzn-ErrorType": f"{kind}:http://internal/"})


class BedrockServer(_Server):
    """Bedrock's Converse API, checking SigV4 signatures (or a Bedrock API key)."""

    FAULTS = frozenset(
        {
            "throttling",
            "quota",
            "context_length",
            "access_denied",
            "not_found",
            "not_ready",
            "unavailable",
            "guardrail",
            "content_filtered",
        }
    )

    def __init__(
        self,
        *,
        access_key: str,
        secret_key: str,
        region: str = "us-east-1",
        session_token: str | None = None,
        api_key: str | None = None,
        responder: Callable[[Request], str] | None = None,
    ) -> None:
        super().__init__(responder)
        self.access_key, self.secret_key = access_key, secret_key
        self.session_token = session_token
        self.region = region
        self.api_key = api_key
        self.max_age_s = 300.0
        """How old a signature may be (AWS allows five minutes of skew)."""
        self.cache_read_tokens = 0
        #: What ``ListFoundationModels`` (one page) and ``ListInferenceProfiles`` (``page``
        #: ids a page at most, ``nextToken``) list.
        self.models: list[str] = []
        self.profiles: list[str] = []
        self.page = 2

    def _lists(self, request: Request) -> Reply:
        denied = self._authenticate(request)
        if denied is not None:
            return denied
        path, _, query = request.path.partition("?")
        if path == "/foundation-models":
            arn = f"arn:aws:bedrock:{self.region}::foundation-model"
            return Reply(
                200,
                {
                    "modelSummaries": [
                        {
                            "modelId": m,
                            "modelArn": f"{arn}/{m}",
                            "modelLifecycle": {"status": "ACTIVE"},
                        }
                        for m in self.models
                    ]
                },
                {},
            )
        asked = {k: v[-1] for k, v in parse_qs(query).items()}
        start = int(asked.get("nextToken", "0"))
        size = min(int(asked.get("maxResults", "1000")), self.page)
        chunk = self.profiles[start : start + size]
        body: dict[str, Any] = {
            "inferenceProfileSummaries": [
                {"inferenceProfileId": i, "inferenceProfileName": i, "status": "ACTIVE"}
                for i in chunk
            ]
        }
        if start + size < len(self.profiles):
            body["nextToken"] = str(start + size)
        return Reply(200, body, {})

    def answer(self, request: Request) -> Reply:
        if request.method == "GET" and request.path.partition("?")[0] in (
            "/foundation-models",
            "/inference-profiles",
        ):
            return self._lists(request)
        match = _CONVERSE.match(request.path)
        if match is None:
            return aws_error(404, "UnknownOperationException", f"no route {request.path}")
        denied = self._authenticate(request)
        if denied is not None:
            return denied
        fault = self._draw(request)
        if fault is not None:
            request.fault = fault[0]
            reply = self._fault(*fault)
            if reply is not None:
                if self.error_text is not None:
                    reply.body["message"] = self.error_text(request)
                return reply
        body = request.body
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return aws_error(400, "ValidationException", "messages is required")
        prompt = "\n".join(
            block.get("text", "")
            for message in body["messages"]
            for block in message.get("content", [])
        )
        system = " ".join(block.get("text", "") for block in body.get("system", []))
        if request.fault in ("guardrail", "content_filtered"):
            reason, blocks = (
                ("guardrail_intervened" if request.fault == "guardrail" else "content_filtered"),
                [],
            )
        elif self.tool_caller is not None and (calls := self.tool_caller(request)):
            reason, blocks = (
                "tool_use",
                [
                    {
                        "toolUse": {
                            "toolUseId": f"tooluse_{i}",
                            "name": c["name"],
                            "input": c["arguments"],
                        }
                    }
                    for i, c in enumerate(calls)
                ],
            )
        else:
            reason, blocks = "end_turn", [{"text": self._text(request, prompt)}]
        text = "".join(b.get("text", "") for b in blocks)
        inputs = estimate_tokens(system + " " + prompt)
        usage: dict[str, int] = {
            "inputTokens": inputs - self.cache_read_tokens,
            "outputTokens": estimate_tokens(text) if text else 0,
        }
        if self.cache_read_tokens:
            usage["cacheReadInputTokens"] = self.cache_read_tokens
        usage["totalTokens"] = inputs + usage["outputTokens"]
        return Reply(
            200,
            {
                "output": {"message": {"role": "assistant", "content": blocks}},
                "stopReason": reason,
                "usage": usage,
                "metrics": {"latencyMs": 5},
            },
            {"x-amzn-RequestId": hashlib.sha256(request.raw).hexdigest()[:32]},
        )

    def _fault(self, name: str, opts: dict[str, float]) -> Reply | None:
        if name == "throttling":
            return aws_error(429, "ThrottlingException", "Too many requests, please wait.")
        if name == "not_ready":
            return aws_error(429, "ModelNotReadyException", "Model is not ready, try again.")
        if name == "quota":
            return aws_error(
                400,
                "ServiceQuotaExceededException",
                "Your request exceeds the service quota for your account.",
            )
        if name == "context_length":
            return aws_error(400, "ValidationException", "Input is too long for requested model.")
        if name == "access_denied":
            return aws_error(
                403,
                "AccessDeniedException",
                "You don't have access to the model with the specified model ID.",
            )
        if name == "not_found":
            return aws_error(404, "ResourceNotFoundException", "Model not found.")
        if name == "unavailable":
            return aws_error(503, "ServiceUnavailableException", "Service unavailable.")
        return None  # guardrail, content_filtered: a 200 with that stop reason

    def _authenticate(self, request: Request) -> Reply | None:
        header = request.headers.get("authorization", "")
        if self.api_key is not None:
            if header != f"Bearer {self.api_key}":
                # Quoting what it was sent, as some gateways do: the client must redact it.
                return aws_error(403, "AccessDeniedException", f"Invalid API key: {header}")
            return None
        return self._verify_sigv4(request, header)

    def _verify_sigv4(self, request: Request, header: str) -> Reply | None:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        found = _AUTH.match(header)
        if found is None:
            return aws_error(403, "MissingAuthenticationTokenException", "Missing signature.")
        if found["key"] != self.access_key:
            return aws_error(403, "UnrecognizedClientException", "The security token is invalid.")
        if found["region"] != self.region or found["service"] != "bedrock":
            return aws_error(403, "InvalidSignatureException", "Credential should be scoped.")
        if request.headers.get("x-amz-security-token") != self.session_token:
            return aws_error(403, "UnrecognizedClientException", "The security token is invalid.")
        stamp = request.headers.get("x-amz-date", "")
        try:
            when = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
        except ValueError:
            return aws_error(403, "InvalidSignatureException", "Bad X-Amz-Date.")
        if abs(time.time() - when.timestamp()) > self.max_age_s:
            return aws_error(403, "InvalidSignatureException", "Signature expired.")
        signed = found["signed"].split(";")
        host = request.headers.get("host", "")
        # Recomputed from what arrived: the path as sent, the signed headers, the raw body.
        received = AWSRequest(
            method=request.method,
            url=f"http://{host}{request.path}",
            data=request.raw,
            headers={name: request.headers.get(name, "") for name in signed},
        )
        received.context["timestamp"] = stamp
        auth = SigV4Auth(
            Credentials(self.access_key, self.secret_key, self.session_token),
            "bedrock",
            self.region,
        )
        canonical = auth.canonical_request(received)
        expected = auth.signature(auth.string_to_sign(received, canonical), received)
        if expected != found["sig"]:
            return aws_error(
                403,
                "InvalidSignatureException",
                "The request signature we calculated does not match the signature you provided.",
            )
        return None

    def model_of(self, request: Request) -> str:
        match = _CONVERSE.match(request.path)
        assert match is not None
        return unquote(match["model"])


# ------------------------------------------------------------------ Gemini / Vertex AI
_GEMINI = re.compile(r"^/v1beta/models/(?P<model>[^/:]+):generateContent$")
_VERTEX = re.compile(
    r"^/v1/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/publishers/google/"
    r"models/(?P<model>[^/:]+):generateContent$"
)


_BATCH_CREATE = re.compile(r"^/v1beta/models/(?P<model>[^/:]+):batchGenerateContent$")
_BATCH = re.compile(r"^/v1beta/batches(?:/(?P<id>[^/?]+))?(?:\?(?P<query>.*))?$")
_GRPC_CODES = {
    "CANCELLED": 1,
    "INVALID_ARGUMENT": 3,
    "NOT_FOUND": 5,
    "PERMISSION_DENIED": 7,
    "RESOURCE_EXHAUSTED": 8,
    "INTERNAL": 13,
    "UNAVAILABLE": 14,
    "UNAUTHENTICATED": 16,
}
_BATCH_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1main."


def google_error(status: int, code: str, message: str) -> Reply:
    return Reply(status, {"error": {"code": status, "message": message, "status": code}}, {})


def _rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


class GeminiServer(_Server):
    """The Gemini API and Vertex AI ``generateContent``, with an OAuth token endpoint."""

    FAULTS = frozenset(
        {
            "resource_exhausted",
            "invalid_argument",
            "context_length",
            "permission_denied",
            "not_found",
            "internal",
            "unavailable",
            "safety",
            "recitation",
            "prompt_blocked",
            "max_tokens",
            "missing_fields",
        }
    )

    def __init__(
        self,
        *,
        api_key: str | None = None,
        service_account: tuple[str, str] | None = None,
        responder: Callable[[Request], str] | None = None,
    ) -> None:
        super().__init__(responder)
        self.api_key = api_key
        self.service_account = service_account
        """(client email, public key PEM): whose signed JWT assertions ``/token`` accepts."""
        self.token_lifetime_s = 3600
        self.issued: list[str] = []
        """Access tokens handed out by ``/token``, in order."""
        self.thoughts_tokens = 0
        self.cached_tokens = 0
        self.model_version = "gemini-2.5-flash-001"
        #: Batch mode: status polls a batch answers "running" before it ends.
        self.batch_polls = 2
        self._batch_holds: dict[str, list[Hold]] = {"create": [], "results": []}
        #: The next batch created ends in this state (``BATCH_STATE_EXPIRED``...), unanswered.
        self.batch_end_state: str | None = None
        #: Requests inside batches whose raw body contains one of these answer an error.
        self.batch_errors_matching: list[str] = []
        #: Batches answer without echoing each request's metadata (its key).
        self.batch_without_keys = False
        #: Every request submitted inside a batch, in submission order (``custom_id`` set).
        self.batch_requests: list[Request] = []
        #: The requests batches answered (what was bought), in answering order.
        self.batch_answered: list[Request] = []
        self._batches: dict[str, dict[str, Any]] = {}

    def _handle(self, request: Request) -> Reply:
        if request.path == "/token":
            return self._token(request)
        if _BATCH_CREATE.match(request.path) or _BATCH.match(request.path):
            with self._lock:
                self.requests.append(request)
            if request.headers.get("x-goog-api-key") != self.api_key:
                return google_error(
                    400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key."
                )
            return self._batch_api(request)
        return super()._handle(request)

    # -- batch mode ------------------------------------------------------------------------
    def _batch_api(self, request: Request) -> Reply:
        create = _BATCH_CREATE.match(request.path)
        if create is not None and request.method == "POST":
            return self._create_batch(request, create["model"])
        route = _BATCH.match(request.path)
        assert route is not None
        if request.method != "GET":
            return google_error(404, "NOT_FOUND", f"no route {request.method} {request.path}")
        if route["id"] is None:
            return self._list_batches(route["query"] or "")
        return self._poll_batch(f"batches/{route['id']}")

    def _create_batch(self, request: Request, model: str) -> Reply:
        try:
            batch = request.body["batch"]
            display_name = batch["display_name"]
            entries = batch["input_config"]["requests"]["requests"]
            assert isinstance(display_name, str) and entries
        except (KeyError, TypeError, AssertionError):
            return google_error(400, "INVALID_ARGUMENT", "batch.input_config is not specified")
        path = f"/v1beta/models/{model}:generateContent"
        items = [
            Request(
                "POST",
                path,
                request.headers,
                entry["request"],
                json.dumps(entry["request"]).encode(),
                custom_id=(entry.get("metadata") or {}).get("key"),
            )
            for entry in entries
        ]
        name = "batches/" + hashlib.sha256(request.raw + str(time.time()).encode()).hexdigest()[:20]
        now = time.time()
        with self._lock:
            end_state, self.batch_end_state = self.batch_end_state, None
            self.batch_requests.extend(items)
            metadata = {
                "@type": _BATCH_TYPE + "GenerateContentBatch",
                "model": f"models/{model}",
                "name": name,
                "displayName": display_name,
                "createTime": _rfc3339(now),
                "updateTime": _rfc3339(now),
                "batchStats": {
                    "requestCount": str(len(items)),
                    "pendingRequestCount": str(len(items)),
                },
                "state": "BATCH_STATE_PENDING",
            }
            self._batches[name] = {
                "items": items,
                "polls": 0,
                "end_state": end_state,
                "operation": {"name": name, "metadata": metadata},
            }
            answer = json.loads(json.dumps(self._batches[name]["operation"]))
        for hold in list(self._batch_holds["create"]):
            hold.wait_turn()
        return Reply(200, answer, {})

    def batch_held(self) -> int:
        """How many batch answers ``hold_batch``'s holds keep waiting now."""
        with self._lock:
            holds = [*self._batch_holds["create"], *self._batch_holds["results"]]
        return sum(hold.waiting for hold in holds)

    def hold_batch(self, what: Literal["create", "results"], after: int = 0) -> Hold:
        """Answer ``after`` more batch creations (``"create"``: each batch is made, then its
        answer held) or polls that carry a batch's results (``"results"``), then hold every
        later one's answer until the returned ``Hold`` is released."""
        hold = Hold(after)
        with self._lock:
            self._batch_holds[what].append(hold)
            self._holds.append(hold)
        return hold

    def _list_batches(self, query: str) -> Reply:
        from urllib.parse import parse_qs

        params = parse_qs(query)
        size = int(params.get("pageSize", ["50"])[0])
        start = int(params.get("pageToken", ["0"])[0])
        with self._lock:
            listed = [b["operation"] for b in reversed(self._batches.values())]
            page = json.loads(json.dumps(listed[start : start + size]))
        body: dict[str, Any] = {"operations": page}
        if start + size < len(listed):
            body["nextPageToken"] = str(start + size)
        return Reply(200, body, {})

    def _poll_batch(self, name: str) -> Reply:
        with self._lock:
            state = self._batches.get(name)
            if state is None:
                return google_error(404, "NOT_FOUND", f"Batch {name} not found.")
            state["polls"] += 1
            operation = state["operation"]
            due = not operation.get("done") and state["polls"] > self.batch_polls
            if not operation.get("done") and not due:
                operation["metadata"]["state"] = "BATCH_STATE_RUNNING"
        if due:
            self._run_batch(state)
        with self._lock:
            answer = json.loads(json.dumps(operation))
        if "response" in answer:
            for hold in list(self._batch_holds["results"]):
                hold.wait_turn()
        return Reply(200, answer, {})

    def _run_batch(self, state: dict[str, Any]) -> None:
        """Answer a batch's requests (as ``generateContent`` would) and end it."""
        operation = state["operation"]
        metadata = operation["metadata"]
        end_state = state["end_state"]
        if end_state is not None:
            with self._lock:
                metadata["state"] = end_state
                operation["done"] = True
                if end_state == "BATCH_STATE_FAILED":
                    operation["error"] = {"code": 13, "message": "The batch failed."}
            return
        entries: list[dict[str, Any]] = []
        failed = 0
        for item in state["items"]:
            entry: dict[str, Any] = {}
            if not self.batch_without_keys:
                entry["metadata"] = {"key": item.custom_id}
            if any(s in item.raw.decode() for s in self.batch_errors_matching):
                entry["error"] = {"code": 13, "message": "Internal error encountered."}
            else:
                reply = self.answer(item)
                if reply.status == 200:
                    entry["response"] = reply.body
                else:
                    error = reply.body["error"]
                    code = _GRPC_CODES.get(error["status"], 2)
                    entry["error"] = {"code": code, "message": error["message"]}
            failed += "error" in entry
            if "response" in entry:
                with self._lock:
                    self.batch_answered.append(item)
            entries.append(entry)
        output = {"inlinedResponses": {"inlinedResponses": entries}}
        with self._lock:
            metadata["state"] = "BATCH_STATE_SUCCEEDED"
            metadata["output"] = output
            metadata["batchStats"] = {
                "requestCount": str(len(entries)),
                "successfulRequestCount": str(len(entries) - failed),
                "failedRequestCount": str(failed),
            }
            metadata["endTime"] = _rfc3339(time.time())
            operation["done"] = True
            operation["response"] = {"@type": _BATCH_TYPE + "GenerateContentBatchOutput", **output}

    def _token(self, request: Request) -> Reply:
        from urllib.parse import parse_qs

        from google.auth import jwt
        from google.auth.exceptions import GoogleAuthError

        form = parse_qs(request.raw.decode())
        try:
            # A service account's grant: a JWT it signed with its private key.
            assert self.service_account is not None
            email, public_key = self.service_account
            # google-auth addresses the assertion to Google's endpoint whatever token_uri is.
            claims = jwt.decode(
                form["assertion"][0],
                certs=public_key,
                audience="https://oauth2.googleapis.com/token",
            )
            if claims.get("iss") != email:
                raise ValueError("not the service account")
        except (KeyError, ValueError, AssertionError, GoogleAuthError):
            return Reply(400, {"error": "invalid_grant", "error_description": "Bad grant."}, {})
        token = f"ya29.loopback-{len(self.issued)}-" + hashlib.sha256(request.raw).hexdigest()[:16]
        with self._lock:
            self.issued.append(token)
        return Reply(
            200,
            {"access_token": token, "expires_in": self.token_lifetime_s, "token_type": "Bearer"},
            {},
        )

    def answer(self, request: Request) -> Reply:
        if _VERTEX.match(request.path):
            if request.headers.get("authorization", "").removeprefix("Bearer ") not in self.issued:
                return google_error(
                    401, "UNAUTHENTICATED", "Request had invalid authentication credentials."
                )
        elif _GEMINI.match(request.path):
            if request.headers.get("x-goog-api-key") != self.api_key:
                return google_error(
                    400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key."
                )
        else:
            return google_error(404, "NOT_FOUND", f"no route {request.path}")
        fault = self._draw(request)
        if fault is not None:
            request.fault = fault[0]
            reply = self._fault(fault[0])
            if reply is not None:
                if self.error_text is not None:
                    reply.body["error"]["message"] = self.error_text(request)
                return reply
        body = request.body
        if not isinstance(body, dict) or not isinstance(body.get("contents"), list):
            return google_error(400, "INVALID_ARGUMENT", "contents is not specified")
        prompt = "\n".join(
            part.get("text", "")
            for content in body["contents"]
            for part in content.get("parts", [])
        )
        system = " ".join(
            part.get("text", "") for part in (body.get("systemInstruction") or {}).get("parts", [])
        )
        usage: dict[str, int] = {"promptTokenCount": estimate_tokens(system + " " + prompt)}
        if self.cached_tokens:
            usage["cachedContentTokenCount"] = self.cached_tokens
        if request.fault == "prompt_blocked":
            usage["totalTokenCount"] = usage["promptTokenCount"]
            return Reply(
                200,
                {
                    "promptFeedback": {"blockReason": "SAFETY", "safetyRatings": []},
                    "usageMetadata": usage,
                    "modelVersion": self.model_version,
                },
                {},
            )
        parts: list[dict[str, Any]] = []
        if self.thoughts_tokens:
            parts.append({"text": "Thinking about the label...", "thought": True})
        if request.fault == "missing_fields":
            return Reply(200, {"usageMetadata": usage, "modelVersion": self.model_version}, {})
        if request.fault in ("safety", "recitation", "max_tokens"):
            reason = request.fault.upper()
        elif self.tool_caller is not None and (calls := self.tool_caller(request)):
            reason = "STOP"
            parts.extend(
                {"functionCall": {"name": c["name"], "args": c["arguments"]}} for c in calls
            )
        else:
            reason = "STOP"
            parts.append({"text": self._text(request, prompt)})
        answer = "".join(p.get("text", "") for p in parts if not p.get("thought"))
        usage["candidatesTokenCount"] = estimate_tokens(answer) if answer else 0
        if self.thoughts_tokens:
            usage["thoughtsTokenCount"] = self.thoughts_tokens
        usage["totalTokenCount"] = (
            usage["promptTokenCount"] + usage["candidatesTokenCount"] + self.thoughts_tokens
        )
        candidate: dict[str, Any] = {"finishReason": reason, "index": 0}
        if parts:
            candidate["content"] = {"role": "model", "parts": parts}
        return Reply(
            200,
            {
                "candidates": [candidate],
                "usageMetadata": usage,
                "modelVersion": self.model_version,
                "responseId": hashlib.sha256(request.raw).hexdigest()[:16],
            },
            {},
        )

    def _fault(self, name: str) -> Reply | None:
        if name == "resource_exhausted":
            return google_error(
                429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."
            )
        if name == "invalid_argument":
            return google_error(400, "INVALID_ARGUMENT", "Request contains an invalid argument.")
        if name == "context_length":
            return google_error(
                400,
                "INVALID_ARGUMENT",
                "The input token count (1048577) exceeds the maximum number of tokens "
                "allowed (1048576).",
            )
        if name == "permission_denied":
            return google_error(
                403, "PERMISSION_DENIED", "Permission denied on resource project demo."
            )
        if name == "not_found":
            return google_error(404, "NOT_FOUND", "models/gemini-9 is not found.")
        if name == "internal":
            return google_error(500, "INTERNAL", "An internal error has occurred.")
        if name == "unavailable":
            return google_error(503, "UNAVAILABLE", "The model is overloaded.")
        return None  # safety, recitation, prompt_blocked: a 200 that says so
