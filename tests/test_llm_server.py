"""The loopback OpenAI/Anthropic test server, exercised over real sockets with httpx."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import contextlib
import json
import select
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.llm_server import Hold, LLMServer, Request, default_text, estimate_tokens

SERVER_SCRIPT = Path(__file__).parent / "support" / "llm_server.py"
# A key in every request, as the real APIs refuse one without (any key passes a server
# started without ``api_key``).
KEY = "sk-test"
OPENAI_HEADERS = {"authorization": f"Bearer {KEY}"}
ANTHROPIC_HEADERS = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
AUTH_LINE = b"Authorization: Bearer sk-test\r\n"


def openai_body(content: str = "What is 2+2?", model: str = "gpt-4o-mini") -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": content}]}


def anthropic_body(content: str = "What is 2+2?", model: str = "claude-x") -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 64,
        "system": "Answer briefly.",
        "messages": [{"role": "user", "content": content}],
    }


@pytest.fixture
def server() -> Iterator[LLMServer]:
    with LLMServer() as srv:
        yield srv


@pytest.fixture
def client(server: LLMServer) -> Iterator[httpx.Client]:
    with httpx.Client(timeout=5.0) as c:
        yield c


def post_openai(client: httpx.Client, server: LLMServer, body: Any, **kw: Any) -> httpx.Response:
    headers = httpx.Headers(OPENAI_HEADERS)
    headers.update(kw.pop("headers", {}))
    return client.post(f"{server.base_url}/chat/completions", json=body, headers=headers, **kw)


def post_anthropic(
    client: httpx.Client, server: LLMServer, body: Any, headers: dict[str, str] | None = None
) -> httpx.Response:
    return client.post(
        f"{server.root_url}/v1/messages",
        json=body,
        headers=ANTHROPIC_HEADERS if headers is None else headers,
    )


# -- happy paths -------------------------------------------------------------------------------


def test_openai_response_shape(server: LLMServer, client: httpx.Client) -> None:
    body = openai_body("hello there general kenobi")
    response = post_openai(client, server, body)

    assert response.status_code == 200
    data = response.json()
    assert data["id"].startswith("chatcmpl-")
    assert data["object"] == "chat.completion"
    assert isinstance(data["created"], int)
    assert data["model"] == "gpt-4o-mini"
    assert data["system_fingerprint"] == "fp_test01"
    [choice] = data["choices"]
    assert choice["index"] == 0
    assert choice["finish_reason"] == "stop"
    assert choice["message"]["role"] == "assistant"
    text = choice["message"]["content"]
    assert text == default_text(body["messages"])
    assert json.loads(text)["echo"] == "hello there general kenobi"
    usage = data["usage"]
    assert usage["prompt_tokens"] == estimate_tokens("hello there general kenobi")
    assert usage["completion_tokens"] == estimate_tokens(text)
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["completion_tokens_details"] == {"reasoning_tokens": 0}

    again = post_openai(client, server, body).json()
    assert again["choices"][0]["message"]["content"] == text
    assert again["id"] != data["id"]
    other = post_openai(client, server, openai_body("something else")).json()
    assert other["choices"][0]["message"]["content"] != text

    recorded = server.requests[0]
    assert recorded.path == "/v1/chat/completions"
    assert recorded.method == "POST"
    assert recorded.protocol == "openai"
    assert recorded.body == body
    assert json.loads(recorded.raw) == body
    assert recorded.headers["content-type"] == "application/json"
    assert recorded.fault is None


def test_anthropic_response_shape(server: LLMServer, client: httpx.Client) -> None:
    body = anthropic_body("Name a colour")
    response = post_anthropic(client, server, body)

    assert response.status_code == 200
    data = response.json()
    assert data["id"].startswith("msg_")
    assert data["type"] == "message"
    assert data["role"] == "assistant"
    assert data["model"] == "claude-x"
    assert data["stop_reason"] == "end_turn"
    [block] = data["content"]
    assert block["type"] == "text"
    assert block["text"] == default_text(body["messages"])
    assert data["usage"] == {
        "input_tokens": estimate_tokens("Answer briefly.\nName a colour"),
        "output_tokens": estimate_tokens(block["text"]),
    }
    assert server.requests[0].protocol == "anthropic"
    assert server.requests[0].headers["anthropic-version"] == "2023-06-01"


def test_responder_alias_and_fingerprint_drift(client: httpx.Client) -> None:
    seen: list[Request] = []

    def responder(request: Request) -> str:
        seen.append(request)
        assert request.body is not None
        return f"answer to {request.body['messages'][-1]['content']}"

    with LLMServer(responder=responder, model_alias={"gpt-4o": "gpt-4o-2024-08-06"}) as server:
        data = post_openai(client, server, openai_body("q1", model="gpt-4o")).json()
        assert data["choices"][0]["message"]["content"] == "answer to q1"
        assert data["model"] == "gpt-4o-2024-08-06"
        assert data["usage"]["completion_tokens"] == estimate_tokens("answer to q1")

        server.fingerprint = "fp_changed"
        server.model_alias["gpt-4o"] = "gpt-4o-2024-11-20"
        data = post_openai(client, server, openai_body("q2", model="gpt-4o")).json()
        assert data["system_fingerprint"] == "fp_changed"
        assert data["model"] == "gpt-4o-2024-11-20"

        data = post_anthropic(client, server, anthropic_body("q3")).json()
        assert data["content"][0]["text"] == "answer to q3"
        assert [r.protocol for r in seen] == ["openai", "openai", "anthropic"]


def test_responder_error_is_a_500_and_recorded(client: httpx.Client) -> None:
    def responder(request: Request) -> str:
        raise RuntimeError("boom")

    with LLMServer(responder=responder) as server:
        response = post_openai(client, server, openai_body())
        assert response.status_code == 500
        assert "boom" in response.json()["error"]["message"]
        assert isinstance(server.errors[0], RuntimeError)


# -- authentication and validation ---------------------------------------------------------------


def test_api_key_checked_in_each_provider_shape(client: httpx.Client) -> None:
    with LLMServer(api_key="sk-good") as server:
        ok = post_openai(client, server, openai_body(), headers={"Authorization": "Bearer sk-good"})
        assert ok.status_code == 200

        bad = post_openai(client, server, openai_body(), headers={"Authorization": "Bearer sk-bad"})
        assert bad.status_code == 401
        assert bad.json()["error"]["code"] == "invalid_api_key"
        assert bad.json()["error"]["message"].startswith("Incorrect API key provided: sk-****-bad.")
        assert (
            post_openai(client, server, openai_body(), headers={"authorization": ""})
            .json()["error"]["message"]
            .startswith("You didn't provide an API key.")
        )

        good_headers = {**ANTHROPIC_HEADERS, "x-api-key": "sk-good"}
        assert post_anthropic(client, server, anthropic_body(), good_headers).status_code == 200
        bad = post_anthropic(client, server, anthropic_body(), {**good_headers, "x-api-key": "no"})
        assert bad.status_code == 401
        assert bad.json() == {
            "type": "error",
            "error": {"type": "authentication_error", "message": "invalid x-api-key"},
        }


@pytest.mark.parametrize("api_key", [None, "sk-good"])
def test_a_request_without_a_key_is_refused(client: httpx.Client, api_key: str | None) -> None:
    """As the real APIs: whatever key the server takes, a request needs one."""
    with LLMServer(api_key=api_key) as server:
        for path in ("/chat/completions", "/responses"):
            response = client.post(f"{server.base_url}{path}", json={**openai_body(), "input": "x"})
            assert response.status_code == 401
            error = response.json()["error"]
            assert error["message"].startswith("You didn't provide an API key.")
            assert (error["type"], error["param"], error["code"]) == (
                "invalid_request_error",
                None,
                None,
            )
        response = post_anthropic(
            client, server, anthropic_body(), {"anthropic-version": "2023-06-01"}
        )
        assert response.status_code == 401
        assert response.json() == {
            "type": "error",
            "error": {"type": "authentication_error", "message": "x-api-key header is required"},
        }
        assert server.count() == 3


def test_a_server_without_api_key_takes_any_key(server: LLMServer, client: httpx.Client) -> None:
    assert post_openai(
        client, server, openai_body(), headers={"authorization": "Bearer a"}
    ).is_success
    headers = {**ANTHROPIC_HEADERS, "x-api-key": "b"}
    assert post_anthropic(client, server, anthropic_body(), headers).is_success


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": [{"role": "user", "content": "x"}]}, None),
        ({"model": "m"}, "messages"),
        ({"model": "m", "messages": []}, "messages"),
    ],
)
def test_openai_validation(
    server: LLMServer, client: httpx.Client, body: dict[str, Any], param: str | None
) -> None:
    response = post_openai(client, server, body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param


@pytest.mark.parametrize("missing", ["model", "messages", "max_tokens", "anthropic-version"])
def test_anthropic_validation(server: LLMServer, client: httpx.Client, missing: str) -> None:
    body = anthropic_body()
    headers = dict(ANTHROPIC_HEADERS)
    if missing == "anthropic-version":
        del headers[missing]
    else:
        del body[missing]
    response = post_anthropic(client, server, body, headers)
    assert response.status_code == 400
    data = response.json()
    assert data["type"] == "error"
    assert data["error"]["type"] == "invalid_request_error"
    assert data["error"]["message"] == (
        "anthropic-version: header is required"
        if missing == "anthropic-version"
        else f"{missing}: Field required"
    )


def test_invalid_json_and_unknown_paths(server: LLMServer, client: httpx.Client) -> None:
    response = client.post(
        f"{server.base_url}/chat/completions", content=b"{not json", headers=OPENAI_HEADERS
    )
    assert response.status_code == 400
    assert server.requests[-1].body is None

    response = client.get(f"{server.base_url}/engines")
    assert response.status_code == 404
    assert response.json()["error"]["message"] == "Invalid URL (GET /v1/engines)"
    response = client.post(f"{server.root_url}/v1/complete", headers=ANTHROPIC_HEADERS, json={})
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "not_found_error"
    assert server.count() == 3


# -- faults ---------------------------------------------------------------------------------------


def test_429_carries_retry_after(server: LLMServer, client: httpx.Client) -> None:
    server.fail_next("429", retry_after=0.25)
    response = post_openai(client, server, openai_body())
    assert response.status_code == 429
    assert response.headers["retry-after"] == "0.25"
    assert response.headers["retry-after-ms"] == "250"
    assert response.json()["error"]["code"] == "rate_limit_exceeded"

    server.fail_next("429")
    response = post_anthropic(client, server, anthropic_body())
    assert response.status_code == 429
    assert response.headers["retry-after"] == "0.05"
    assert response.json()["error"]["type"] == "rate_limit_error"
    assert post_anthropic(client, server, anthropic_body()).status_code == 200


@pytest.mark.parametrize("status", ["500", "503", "529"])
def test_server_error_faults(server: LLMServer, client: httpx.Client, status: str) -> None:
    server.fail_next(status, times=2)
    openai = post_openai(client, server, openai_body())
    assert openai.status_code == int(status)
    assert openai.json()["error"]["type"] == "server_error"
    anthropic = post_anthropic(client, server, anthropic_body())
    assert anthropic.status_code == int(status)
    expected = "overloaded_error" if status == "529" else "api_error"
    assert anthropic.json()["error"]["type"] == expected


@pytest.mark.parametrize(
    ("status", "openai_says", "anthropic_type"),
    [
        ("400", "Unsupported parameter: 'max_tokens'", "invalid_request_error"),
        ("404", "The model `gpt-4o-mini` does not exist", "not_found_error"),
        ("405", "Invalid method for URL (POST /v1/chat/completions)", "invalid_request_error"),
        ("422", "Input should be a valid integer", "invalid_request_error"),
        ("501", "This server does not support this endpoint", "api_error"),
        ("502", "Bad gateway.", "api_error"),
    ],
)
def test_status_faults_answer_in_each_providers_shape(
    server: LLMServer, client: httpx.Client, status: str, openai_says: str, anthropic_type: str
) -> None:
    server.fail_next(status, times=2)
    openai = post_openai(client, server, openai_body())
    assert openai.status_code == int(status)
    assert openai.json()["error"]["message"].startswith(openai_says)
    anthropic = post_anthropic(client, server, anthropic_body())
    assert anthropic.status_code == int(status)
    assert anthropic.json()["type"] == "error"
    assert anthropic.json()["error"]["type"] == anthropic_type
    assert post_openai(client, server, openai_body()).status_code == 200


def test_a_spent_credit_is_each_providers_answer(server: LLMServer, client: httpx.Client) -> None:
    server.fail_next("quota", times=2)
    openai = post_openai(client, server, openai_body())
    assert openai.status_code == 429
    assert openai.json()["error"]["code"] == "insufficient_quota"
    anthropic = post_anthropic(client, server, anthropic_body())
    assert anthropic.status_code == 400  # Anthropic's is no 429: waiting would not help
    assert anthropic.json()["error"]["type"] == "invalid_request_error"
    assert "credit balance is too low" in anthropic.json()["error"]["message"]


def test_a_status_fault_for_one_model_answers_every_request_of_it_alone(
    server: LLMServer, client: httpx.Client
) -> None:
    server.fail_matching("gpt-broken", "501")
    broken = [post_openai(client, server, openai_body(f"q{i}", "gpt-broken")) for i in range(3)]
    assert [r.status_code for r in broken] == [501, 501, 501]
    assert post_openai(client, server, openai_body("q0", "gpt-fine")).status_code == 200


def test_reset_drops_the_connection(server: LLMServer, client: httpx.Client) -> None:
    server.fail_next("reset")
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        post_openai(client, server, openai_body())
    assert post_openai(client, server, openai_body()).status_code == 200
    assert [r.fault for r in server.requests] == ["reset", None]


def test_timeout_fault_outlasts_client_timeout(server: LLMServer) -> None:
    # The answer would come after a minute: the client's own timeout is what ends the wait.
    server.fail_next("timeout", delay=60.0)
    with httpx.Client(timeout=0.2) as short, pytest.raises(httpx.ReadTimeout):
        post_openai(short, server, openai_body())
    with httpx.Client(timeout=0.2) as short:
        assert post_openai(short, server, openai_body()).status_code == 200


def test_malformed_and_missing_fields(server: LLMServer, client: httpx.Client) -> None:
    server.fail_next("malformed")
    response = post_openai(client, server, openai_body())
    assert response.status_code == 200
    assert len(response.content) == int(response.headers["content-length"])
    with pytest.raises(json.JSONDecodeError):
        response.json()

    server.fail_next("missing_fields", times=2)
    data = post_openai(client, server, openai_body()).json()
    assert "choices" not in data
    assert data["object"] == "chat.completion"
    data = post_anthropic(client, server, anthropic_body()).json()
    assert "content" not in data
    assert data["type"] == "message"


def test_fail_next_counts_down_and_queues(server: LLMServer, client: httpx.Client) -> None:
    server.fail_next("500", times=2)
    server.fail_next("503")
    statuses = [post_openai(client, server, openai_body()).status_code for _ in range(5)]
    assert statuses == [500, 500, 503, 200, 200]
    assert [r.fault for r in server.requests] == ["500", "500", "503", None, None]
    assert server.count(lambda r: r.fault is not None) == 3


def test_error_text_writes_the_message_of_injected_errors(
    server: LLMServer, client: httpx.Client
) -> None:
    server.error_text = lambda r: f"key {r.headers.get('authorization')} rejected"
    server.fail_next("401")
    server.fail_next("500")
    rejected = post_openai(client, server, openai_body(), headers={"Authorization": "Bearer sk-1"})
    failed = post_anthropic(client, server, anthropic_body())
    assert rejected.status_code == 401
    assert rejected.json()["error"]["message"] == "key Bearer sk-1 rejected"
    assert (failed.status_code, failed.json()["error"]["message"]) == (500, "key None rejected")
    assert post_openai(client, server, openai_body()).status_code == 200


def test_fail_matching(server: LLMServer, client: httpx.Client) -> None:
    server.fail_matching("poison", "500")
    server.fail_matching("once", "503", times=1)
    assert post_openai(client, server, openai_body("poison pill")).status_code == 500
    assert post_openai(client, server, openai_body("poison again")).status_code == 500
    assert post_openai(client, server, openai_body("fine")).status_code == 200
    assert post_openai(client, server, openai_body("just once")).status_code == 503
    assert post_openai(client, server, openai_body("just once")).status_code == 200
    # Substrings match the decoded text too, whatever escaping the client used.
    raw = json.dumps(openai_body("poisoned café"), ensure_ascii=True)
    response = client.post(
        f"{server.base_url}/chat/completions", content=raw, headers=OPENAI_HEADERS
    )
    assert response.status_code == 500

    server.clear_faults()
    assert post_openai(client, server, openai_body("poison")).status_code == 200


def test_fail_randomly_is_deterministic_by_body(client: httpx.Client) -> None:
    bodies = [openai_body(f"question {i}") for i in range(40)]

    def failing(order: list[dict[str, Any]]) -> set[str]:
        with LLMServer() as server:
            server.fail_randomly("500", rate=0.3, seed=1234)
            for body in order:
                post_openai(client, server, body)
            return {r.body["messages"][0]["content"] for r in server.requests if r.fault and r.body}

    first = failing(bodies)
    # Another instance, reversed arrival order and reordered JSON keys: same failures.
    reordered = [dict(reversed(list(body.items()))) for body in reversed(bodies)]
    second = failing(reordered)
    assert first == second
    assert 3 <= len(first) <= 25

    with LLMServer() as server:
        server.fail_randomly("500", rate=0.3, seed=99)
        for body in bodies:
            post_openai(client, server, body)
        other_seed = {
            r.body["messages"][0]["content"] for r in server.requests if r.fault and r.body
        }
    assert other_seed != first


def test_fail_randomly_per_attempt_lets_retries_succeed(client: httpx.Client) -> None:
    def attempts_needed() -> list[int]:
        with LLMServer() as server:
            server.fail_randomly("503", rate=0.5, seed=7, per_attempt=True)
            counts = []
            for i in range(10):
                for attempt in range(1, 30):
                    if post_openai(client, server, openai_body(f"q{i}")).status_code == 200:
                        counts.append(attempt)
                        break
            return counts

    first = attempts_needed()
    assert len(first) == 10
    assert max(first) > 1
    assert attempts_needed() == first


def test_fault_arguments_are_checked(server: LLMServer) -> None:
    with pytest.raises(ValueError, match="unknown fault"):
        server.fail_next("418")
    with pytest.raises(TypeError, match="retry_after"):
        server.fail_next("500", retry_after=1)
    with pytest.raises(ValueError):
        server.fail_randomly("500", rate=1.5, seed=0)


def test_reset_forgets_requests_and_faults(server: LLMServer, client: httpx.Client) -> None:
    server.fail_matching("x", "500")
    post_openai(client, server, openai_body("x"))
    server.reset()
    assert server.count() == 0
    assert post_openai(client, server, openai_body("x")).status_code == 200


# -- HTTP behaviour ------------------------------------------------------------------------------


def test_keep_alive_reuses_one_connection(server: LLMServer, client: httpx.Client) -> None:
    for i in range(50):
        assert post_openai(client, server, openai_body(f"q{i}")).status_code == 200
    assert server.connections_opened == 1
    assert server.count() == 50


def test_connection_close_and_chunked_bodies(server: LLMServer) -> None:
    payload = json.dumps(openai_body("chunked")).encode()

    def chunks() -> Iterator[bytes]:
        yield payload[:10]
        yield payload[10:]

    with httpx.Client() as client:
        response = client.post(
            f"{server.base_url}/chat/completions", content=chunks(), headers=OPENAI_HEADERS
        )
    assert response.status_code == 200
    assert server.requests[-1].headers["transfer-encoding"] == "chunked"
    assert server.requests[-1].body == openai_body("chunked")

    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%s"
            b"Content-Length: %d\r\n\r\n%s" % (AUTH_LINE, len(payload), payload)
        )
        received = b""
        while chunk := sock.recv(65536):  # ends when the server closes the connection
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK")
    assert b"connection: close" in head.lower()
    assert json.loads(body)["object"] == "chat.completion"


def test_a_hold_answers_the_first_requests_and_holds_the_rest_until_released(
    server: LLMServer,
) -> None:
    with server.hold(after=2) as held, cf.ThreadPoolExecutor(4) as pool:
        with httpx.Client(timeout=60) as c:
            assert post_openai(c, server, openai_body("a")).status_code == 200
            assert post_openai(c, server, openai_body("b")).status_code == 200
        futures = [
            pool.submit(
                lambda t: httpx.post(
                    f"{server.base_url}/chat/completions",
                    json=openai_body(t),
                    headers=OPENAI_HEADERS,
                    timeout=60,
                ),
                t,
            )
            for t in ("c", "d")
        ]
        while held.waiting < 2:  # both received, neither answered
            time.sleep(0.005)
        assert server.count() == 4 and not any(f.done() for f in futures)
        held.release()
        assert [f.result().status_code for f in futures] == [200, 200]
    assert held.waiting == 0
    with httpx.Client(timeout=60) as c:  # released: later requests are answered at once
        assert post_openai(c, server, openai_body("e")).status_code == 200


def test_stop_releases_a_hold() -> None:
    server = LLMServer().start()
    held = server.hold()
    payload = json.dumps(openai_body()).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n%s"
            b"Content-Length: %d\r\n\r\n%s" % (AUTH_LINE, len(payload), payload)
        )
        while held.waiting == 0:
            time.sleep(0.005)
        server.stop()  # returns: the held request does not keep it waiting
    assert held.waiting == 0


def test_stop_closes_connections_even_mid_request() -> None:
    server = LLMServer().start()
    server.fail_next("timeout", delay=30)
    payload = json.dumps(openai_body()).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n%s"
            b"Content-Length: %d\r\n\r\n%s" % (AUTH_LINE, len(payload), payload)
        )
        while server.count() == 0:
            time.sleep(0.01)
        # Had stop waited for the request, its answer would be read here, not the close.
        server.stop()
        with contextlib.suppress(ConnectionResetError):
            assert sock.recv(100) == b""


def test_300_concurrent_requests_with_httpx() -> None:
    # 30 clients with 10 requests in flight each: httpcore's pool does work proportional to
    # queued requests times open connections at every scheduling step, so one pool holding all
    # 300 would measure the client rather than the server. Every response is held until
    # all 300 requests are in flight at the server at once.
    clients, per_client = 30, 10
    n = clients * per_client
    tls = ssl.create_default_context()

    async def batch(server: LLMServer, k: int) -> list[int]:
        limits = httpx.Limits(max_connections=per_client)
        async with httpx.AsyncClient(
            base_url=server.base_url,
            verify=tls,
            limits=limits,
            timeout=120,
            headers=OPENAI_HEADERS,
        ) as c:
            responses = await asyncio.gather(
                *(
                    c.post("/chat/completions", json=openai_body(f"{k}-{i}"))
                    for i in range(per_client)
                )
            )
        return [r.status_code for r in responses]

    async def release(held: Hold) -> int:
        deadline = time.monotonic() + 60  # never hangs: too few in flight fails below
        while held.waiting < n and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        in_flight = held.waiting
        held.release()
        return in_flight

    async def run_all(server: LLMServer, held: Hold) -> tuple[list[int], int]:
        batches, in_flight = await asyncio.gather(
            asyncio.gather(*(batch(server, k) for k in range(clients))), release(held)
        )
        return [status for statuses in batches for status in statuses], in_flight

    with LLMServer() as server, server.hold() as held:
        statuses, in_flight = asyncio.run(run_all(server, held))
    assert in_flight == n
    assert statuses == [200] * n
    assert server.count() == n


def test_300_simultaneous_connections() -> None:
    payload = json.dumps(openai_body()).encode()
    request = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n%s" % (
        AUTH_LINE,
        len(payload),
        payload,
    )

    async def exchange(
        streams: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    ) -> bytes:
        reader, writer = streams
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
        writer.close()
        return head.split(b"\r\n")[0]

    async def run_all(port: int) -> list[bytes]:
        connections = await asyncio.gather(
            *(asyncio.open_connection("127.0.0.1", port) for _ in range(300))
        )
        return await asyncio.gather(*(exchange(c) for c in connections))

    with LLMServer(latency=0.05) as server:
        status_lines = asyncio.run(run_all(server.port))
    assert status_lines == [b"HTTP/1.1 200 OK"] * 300
    assert server.peak_connections >= 256


# -- command line --------------------------------------------------------------------------------


def test_cli_prints_ready_serves_and_stops_on_sigterm() -> None:
    proc = subprocess.Popen(
        [sys.executable, str(SERVER_SCRIPT), "--port", "0", "--latency", "0.01", "--api-key", "k"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        readable, _, _ = select.select([proc.stdout], [], [], 10)
        assert readable, "server did not print READY"
        line = proc.stdout.readline().decode()
        word, url = line.split()
        assert word == "READY"
        assert url.startswith("http://127.0.0.1:")
        response = httpx.post(
            f"{url}/v1/chat/completions", json=openai_body(), headers={"Authorization": "Bearer k"}
        )
        assert response.status_code == 200
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert stdout == b""
    assert stderr == b""


def test_the_model_lists_are_what_the_sdks_read(server: LLMServer) -> None:
    import anthropic
    import openai

    server.models = [f"model-2026-01-{d:02d}" for d in range(1, 8)]
    key = server.api_key or "sk-any"
    client = openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=0)
    assert [m.id for m in client.models.list()] == server.models
    sdk = anthropic.Anthropic(
        base_url=server.root_url, api_key=key, max_retries=0, default_headers={"x-api-key": key}
    )
    assert [m.id for m in sdk.models.list(limit=3)] == server.models  # three pages
