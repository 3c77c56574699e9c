"""The model-API stand-in's answers, read as the official SDKs read the real APIs' answers.

Every answer ``tests/support/llm_server.py`` gives over a socket for OpenAI's Chat
Completions and Responses APIs and Anthropic's Messages API, their batch APIs included, is
validated against the ``openai`` and ``anthropic`` packages' response types: success bodies,
withheld and cut completions, and the error body of every fault and refusal. Validation is
strict: the SDK models accept a body and, beyond that, every field a type declares without a
default must be present in the JSON, in nested models, lists and unions too (``missing``).
A stand-in laxer than the real API would let the tests that use it prove little.

Where an SDK has no type (OpenAI's error envelope, a line of a batch's output file), the
documented shape is checked.
"""

from __future__ import annotations

import json
import types
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import httpx
import pydantic
import pytest
from anthropic.types import ErrorResponse, Message
from anthropic.types.messages import MessageBatch, MessageBatchIndividualResponse
from openai.types import Batch, BatchError, CreateEmbeddingResponse, ErrorObject, FileObject
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from support.llm_server import FAULTS, LLMServer, Request

KEY = "sk-standin-0f3a9c"
OPENAI_AUTH = {"authorization": f"Bearer {KEY}"}
ANTHROPIC_AUTH = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
TOOLS_CHAT = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look a word up.",
            "parameters": {"type": "object", "properties": {"word": {"type": "string"}}},
        },
    }
]
TOOLS_RESPONSES = [
    {
        "type": "function",
        "name": "lookup",
        "description": "Look a word up.",
        "parameters": {"type": "object", "properties": {"word": {"type": "string"}}},
    }
]
TOOLS_ANTHROPIC = [
    {
        "name": "lookup",
        "description": "Look a word up.",
        "input_schema": {"type": "object", "properties": {"word": {"type": "string"}}},
    }
]

# -- strict validation -------------------------------------------------------------------------


def _bare(annotation: Any) -> Any:
    """``annotation`` without its ``Annotated`` wrappers (a union's discriminator...)."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel)


def _tags(model: type[pydantic.BaseModel]) -> tuple[Any, ...]:
    """The values a model's ``type`` field takes (its discriminator in a union)."""
    field = model.model_fields.get("type")
    if field is None:
        return ()
    found: list[Any] = []

    def collect(annotation: Any) -> None:
        annotation = _bare(annotation)
        if get_origin(annotation) is Literal:
            found.extend(get_args(annotation))
        elif get_origin(annotation) in (Union, types.UnionType):
            for arm in get_args(annotation):
                collect(arm)

    collect(field.annotation)
    return tuple(found)


def missing(model: type[pydantic.BaseModel], data: Any, at: str = "$") -> list[str]:
    """Where ``data`` lacks a field ``model`` declares required (no default), at any depth:
    nested models, lists and dicts of them, and unions (the member whose ``type`` literal is
    the value's ``type``; without one, the member the value comes closest to)."""
    if not isinstance(data, dict):
        return []
    gaps: list[str] = []
    for name, field in model.model_fields.items():
        key = field.alias or name
        if key not in data:
            if field.is_required():
                gaps.append(f"{at}.{key}")
        else:
            gaps += _missing_in(field.annotation, data[key], f"{at}.{key}")
    return gaps


def _missing_in(annotation: Any, value: Any, at: str) -> list[str]:
    annotation = _bare(annotation)
    if value is None:
        return []
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        arms = [_bare(arm) for arm in get_args(annotation) if arm is not type(None)]
        models = [arm for arm in arms if _is_model(arm)]
        if isinstance(value, dict) and models:
            if "type" in value:
                tagged = [m for m in models if value["type"] in _tags(m)]
                if tagged:
                    return missing(tagged[0], value, at)
            return min((missing(m, value, at) for m in models), key=len)
        if isinstance(value, list):
            for arm in arms:
                if get_origin(arm) in (list, tuple):
                    return _missing_in(arm, value, at)
        return []
    if origin in (list, tuple) and isinstance(value, list):
        [item, *_] = get_args(annotation) or (Any,)
        return [gap for i, v in enumerate(value) for gap in _missing_in(item, v, f"{at}[{i}]")]
    if origin is dict and isinstance(value, dict):
        args = get_args(annotation)
        if len(args) != 2:
            return []
        return [gap for k, v in value.items() for gap in _missing_in(args[1], v, f"{at}.{k}")]
    if _is_model(annotation):
        return missing(annotation, value, at)
    return []


def strictly(model: type[pydantic.BaseModel], data: Any) -> None:
    """``data`` is a ``model`` by the SDK's validation and has every required field."""
    model.model_validate(data)
    assert missing(model, data) == [], f"{model.__name__} lacks required fields"


class _OpenAIErrorBody(pydantic.BaseModel):
    """OpenAI's documented error envelope (the SDK types only the inner object)."""

    model_config = pydantic.ConfigDict(extra="forbid")
    error: ErrorObject


def openai_error(data: Any) -> None:
    """An OpenAI error body: ``{"error": {"message", "type", "param", "code"}}``."""
    strictly(_OpenAIErrorBody, data)
    assert set(data["error"]) >= {"message", "type", "param", "code"}


def anthropic_error(data: Any) -> None:
    """An Anthropic error body: ``{"type": "error", "error": {"type", "message"}}``."""
    strictly(ErrorResponse, data)
    assert data["type"] == "error" and set(data["error"]) >= {"type", "message"}


# Anthropic's documented status of each error type.
ANTHROPIC_STATUS = {
    "invalid_request_error": {400, 405, 413, 422},
    "authentication_error": {401},
    "billing_error": {402},
    "permission_error": {403},
    "not_found_error": {404},
    "rate_limit_error": {429},
    "api_error": {500, 501, 502, 503},
    "timeout_error": {504},
    "overloaded_error": {529},
}

# -- the stand-in ------------------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[LLMServer]:
    with LLMServer(api_key=KEY) as srv:
        yield srv


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10.0) as c:
        yield c


def _calls(request: Request) -> list[dict[str, Any]]:
    """Two tool calls when the request offers tools: one with object arguments, one (for
    OpenAI's APIs) with a string, which they send as it is."""
    if not (request.body or {}).get("tools"):
        return []
    second: Any = {"word": "ligate"}
    if request.protocol != "anthropic":
        second = json.dumps(second)
    return [
        {"name": "lookup", "arguments": {"word": "ossify"}},
        {"name": "lookup", "arguments": second},
    ]


def chat_body(**extra: Any) -> dict[str, Any]:
    return {"model": "gpt-x", "messages": [{"role": "user", "content": "Name a colour"}], **extra}


def responses_body(**extra: Any) -> dict[str, Any]:
    return {"model": "gpt-x", "input": [{"role": "user", "content": "Name a colour"}], **extra}


def anthropic_body(**extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-x",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "Name a colour"}],
        **extra,
    }


API: dict[
    str,
    tuple[
        str,
        dict[str, str],
        Callable[..., dict[str, Any]],
        type[pydantic.BaseModel],
        Callable[[Any], None],
    ],
] = {
    # name: (path from the root, auth headers, body maker, success type, error check)
    "chat": ("/v1/chat/completions", OPENAI_AUTH, chat_body, ChatCompletion, openai_error),
    "responses": ("/v1/responses", OPENAI_AUTH, responses_body, Response, openai_error),
    "anthropic": ("/v1/messages", ANTHROPIC_AUTH, anthropic_body, Message, anthropic_error),
}
SUCCESS: dict[str, dict[str, Any]] = {
    # name: the answer asked for (tool calls, with or without text; usage details; a fault)
    "text": {},
    "tool calls": {"tools": ""},
    "tool calls and text": {"tools": "Looking it up."},
    "reasoning and cached tokens": {"usage": True},
    "content filter": {"fault": "filtered"},
    "token limit": {"fault": "truncated"},
    "slow answer": {"fault": "timeout", "delay": 0.01},
}


def _tool_calls(api: str, data: dict[str, Any]) -> int:
    if api == "chat":
        return len(data["choices"][0]["message"]["tool_calls"])
    if api == "responses":
        return sum(item["type"] == "function_call" for item in data["output"])
    return sum(block["type"] == "tool_use" for block in data["content"])


def _post(
    client: httpx.Client, server: LLMServer, api: str, body: Any, headers: dict[str, str]
) -> httpx.Response:
    path = API[api][0]
    if isinstance(body, bytes):
        return client.post(f"{server.root_url}{path}", content=body, headers=headers)
    return client.post(f"{server.root_url}{path}", json=body, headers=headers)


@pytest.mark.parametrize("case", SUCCESS)
@pytest.mark.parametrize("api", API)
def test_every_answer_is_the_sdk_type(
    server: LLMServer, client: httpx.Client, api: str, case: str
) -> None:
    _, headers, make, model, _ = API[api]
    asked = SUCCESS[case]
    body = make()
    if "tools" in asked:
        text = asked["tools"]
        server.tool_caller = _calls
        server.responder = lambda request: text
        body["tools"] = {"chat": TOOLS_CHAT, "responses": TOOLS_RESPONSES}.get(api, TOOLS_ANTHROPIC)
        if api == "responses":
            body["tool_choice"] = {"type": "function", "name": "lookup"}
    if "usage" in asked:
        server.reasoning_tokens, server.cached_tokens = 7, 3
    if "fault" in asked:
        server.fail_next(asked["fault"], **({"delay": asked["delay"]} if "delay" in asked else {}))

    response = _post(client, server, api, body, headers)

    assert response.status_code == 200, response.text
    data = response.json()
    strictly(model, data)
    if "tools" in asked:
        assert _tool_calls(api, data) == 2


ERRORS: dict[str, tuple[str, Any, dict[str, str] | None, int]] = {
    # name: (api, body (bytes: sent as they are), headers (None: the API's), status)
    "chat without a key": ("chat", chat_body(), {}, 401),
    "chat with another key": ("chat", chat_body(), {"authorization": "Bearer sk-other"}, 401),
    "chat with a basic key": ("chat", chat_body(), {"authorization": f"Basic {KEY}"}, 401),
    "chat body not JSON": ("chat", b"{not json", None, 400),
    "chat without a model": ("chat", {"messages": [{"role": "user", "content": "x"}]}, None, 400),
    "chat without messages": ("chat", {"model": "gpt-x"}, None, 400),
    "chat with no message": ("chat", {"model": "gpt-x", "messages": []}, None, 400),
    "chat streamed": ("chat", chat_body(stream=True), None, 400),
    "responses without a key": ("responses", responses_body(), {}, 401),
    "responses with another key": (
        "responses",
        responses_body(),
        {"authorization": "Bearer sk-other"},
        401,
    ),
    "responses body not JSON": ("responses", b"[1, 2]", None, 400),
    "responses without a model": ("responses", {"input": "x"}, None, 400),
    "responses without input": ("responses", {"model": "gpt-x"}, None, 400),
    "responses with max_tokens": ("responses", responses_body(max_tokens=5), None, 400),
    "responses streamed": ("responses", responses_body(stream=True), None, 400),
    "anthropic without a key": ("anthropic", anthropic_body(), {"anthropic-version": "x"}, 401),
    "anthropic with another key": (
        "anthropic",
        anthropic_body(),
        {**ANTHROPIC_AUTH, "x-api-key": "sk-other"},
        401,
    ),
    "anthropic without a version": ("anthropic", anthropic_body(), {"x-api-key": KEY}, 400),
    "anthropic body not JSON": ("anthropic", b"", None, 400),
    "anthropic without a model": (
        "anthropic",
        {k: v for k, v in anthropic_body().items() if k != "model"},
        None,
        400,
    ),
    "anthropic without messages": (
        "anthropic",
        {k: v for k, v in anthropic_body().items() if k != "messages"},
        None,
        400,
    ),
    "anthropic without max_tokens": (
        "anthropic",
        {k: v for k, v in anthropic_body().items() if k != "max_tokens"},
        None,
        400,
    ),
    "anthropic model not a string": ("anthropic", anthropic_body(model=4), None, 400),
    "anthropic with no message": ("anthropic", anthropic_body(messages=[]), None, 400),
    "anthropic max_tokens zero": ("anthropic", anthropic_body(max_tokens=0), None, 400),
    "anthropic streamed": ("anthropic", anthropic_body(stream=True), None, 400),
}


@pytest.mark.parametrize("case", ERRORS)
def test_every_refusal_is_the_apis_error(
    server: LLMServer, client: httpx.Client, case: str
) -> None:
    api, body, headers, status = ERRORS[case]
    response = _post(client, server, api, body, API[api][1] if headers is None else headers)
    assert response.status_code == status, response.text
    API[api][4](response.json())
    if api == "anthropic":
        assert response.status_code in ANTHROPIC_STATUS[response.json()["error"]["type"]]


def test_a_responder_that_fails_is_a_server_error(server: LLMServer, client: httpx.Client) -> None:
    def fails(request: Request) -> str:
        raise RuntimeError("no answer")

    server.responder = fails
    for api, (_, headers, make, _, check) in API.items():
        response = _post(client, server, api, make(), headers)
        assert response.status_code == 500
        check(response.json())


#: Faults whose answer has a body: the error each provider sends for it.
BODY_FAULTS = sorted(
    set(FAULTS) - {"reset", "malformed", "missing_fields", "filtered", "truncated", "timeout"}
)


@pytest.mark.parametrize(
    ("api", "fault"),
    # 501 is llama.cpp's answer to an OpenAI request, in its own shape (the test below)
    [(a, f) for a in API for f in BODY_FAULTS if f != "501" or a == "anthropic"],
)
def test_every_fault_answers_the_apis_error(
    server: LLMServer, client: httpx.Client, api: str, fault: str
) -> None:
    _, headers, make, _, check = API[api]
    server.fail_next(fault)
    response = _post(client, server, api, make(), headers)
    assert response.status_code >= 400
    check(response.json())
    if api == "anthropic":
        assert response.status_code in ANTHROPIC_STATUS[response.json()["error"]["type"]]


def test_the_501_is_llama_cpps_not_openais(server: LLMServer, client: httpx.Client) -> None:
    """The one error body not in OpenAI's shape, by design: what llama.cpp's server sends
    (an integer ``code``) when asked for what it was not started to do."""
    server.fail_next("501")
    response = _post(client, server, "chat", chat_body(), OPENAI_AUTH)
    assert response.status_code == 501
    assert response.json()["error"]["code"] == 501
    with pytest.raises(pydantic.ValidationError):
        openai_error(response.json())


@pytest.mark.parametrize("api", API)
def test_the_missing_fields_fault_is_what_the_sdk_refuses(
    server: LLMServer, client: httpx.Client, api: str
) -> None:
    """The fault that stands for a broken answer is one the SDK would not read."""
    _, headers, make, model, _ = API[api]
    server.fail_next("missing_fields")
    response = _post(client, server, api, make(), headers)
    assert response.status_code == 200
    with pytest.raises(pydantic.ValidationError):
        model.model_validate(response.json())


# -- batch APIs --------------------------------------------------------------------------------


class _BatchResponse(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    status_code: int
    request_id: str
    body: dict[str, Any]


class _BatchOutputLine(pydantic.BaseModel):
    """A line of an OpenAI batch's output or error file, as documented (the SDK has no type
    for it): ``response`` for an answered request, ``error`` for one never sent."""

    model_config = pydantic.ConfigDict(extra="forbid")
    id: str
    custom_id: str
    response: _BatchResponse | None
    error: BatchError | None


def _lines(data: bytes) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = [json.loads(line) for line in data.splitlines() if line.strip()]
    return lines


def _openai_batch(
    client: httpx.Client, server: LLMServer, endpoint: str, make: Callable[..., dict[str, Any]]
) -> dict[str, Any]:
    """Run a batch of four requests to ``endpoint``: two answered, one failing, one expired;
    every answer on the way validated. Returns the ended batch."""
    url = server.base_url
    server.batch_polls = 1
    server.batch_errors_matching = ["fails here"]
    server.batch_expire_after = 3
    texts = ["Name a colour", "Name a bird", "this one fails here", "Name a tree"]
    jsonl = "".join(
        json.dumps(
            {
                "custom_id": f"item-{n}",
                "method": "POST",
                "url": endpoint,
                "body": make(**{"messages" if "chat" in endpoint else "input": text_input(t)}),
            }
        )
        + "\n"
        for n, t in enumerate(texts)
    )
    uploaded = client.post(
        f"{url}/files",
        headers=OPENAI_AUTH,
        data={"purpose": "batch"},
        files={"file": ("batch.jsonl", jsonl.encode(), "application/jsonl")},
    )
    assert uploaded.status_code == 200, uploaded.text
    strictly(FileObject, uploaded.json())
    created = client.post(
        f"{url}/batches",
        headers=OPENAI_AUTH,
        json={
            "input_file_id": uploaded.json()["id"],
            "endpoint": endpoint,
            "completion_window": "24h",
        },
    )
    assert created.status_code == 200, created.text
    batch: dict[str, Any] = created.json()
    strictly(Batch, batch)
    while batch["status"] not in ("completed", "expired", "failed"):
        polled = client.get(f"{url}/batches/{batch['id']}", headers=OPENAI_AUTH)
        assert polled.status_code == 200
        batch = polled.json()
        strictly(Batch, batch)
    listed = client.get(f"{url}/batches?limit=5", headers=OPENAI_AUTH).json()
    assert listed["object"] == "list" and isinstance(listed["has_more"], bool)
    for item in listed["data"]:
        strictly(Batch, item)
    return batch


def text_input(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


@pytest.mark.parametrize(
    ("endpoint", "make", "model"),
    [
        ("/v1/chat/completions", chat_body, ChatCompletion),
        ("/v1/responses", responses_body, Response),
    ],
    ids=["chat", "responses"],
)
def test_openai_batch_answers_are_the_sdk_types(
    server: LLMServer,
    client: httpx.Client,
    endpoint: str,
    make: Callable[..., dict[str, Any]],
    model: type[pydantic.BaseModel],
) -> None:
    batch = _openai_batch(client, server, endpoint, make)
    assert batch["status"] == "expired"
    kinds = []
    for name in ("output_file_id", "error_file_id"):
        got = client.get(f"{server.base_url}/files/{batch[name]}/content", headers=OPENAI_AUTH)
        assert got.status_code == 200
        for line in _lines(got.content):
            strictly(_BatchOutputLine, line)
            if line["response"] is None:
                kinds.append("expired")
                assert set(line["error"]) >= {"code", "message"}
            elif line["response"]["status_code"] == 200:
                kinds.append("answered")
                strictly(model, line["response"]["body"])
            else:
                kinds.append("failed")
                openai_error(line["response"]["body"])
    assert sorted(kinds) == ["answered", "answered", "expired", "failed"]


def test_anthropic_batch_answers_are_the_sdk_types(server: LLMServer, client: httpx.Client) -> None:
    url = f"{server.root_url}/v1/messages/batches"
    server.batch_polls = 1
    server.batch_errors_matching = ["fails here"]
    server.batch_expire_after = 3
    texts = ["Name a colour", "Name a bird", "this one fails here", "Name a tree"]
    requests = [
        {"custom_id": f"item-{n}", "params": anthropic_body(messages=text_input(t))}
        for n, t in enumerate(texts)
    ]
    created = client.post(url, headers=ANTHROPIC_AUTH, json={"requests": requests})
    assert created.status_code == 200, created.text
    batch = created.json()
    strictly(MessageBatch, batch)
    while batch["processing_status"] != "ended":
        polled = client.get(f"{url}/{batch['id']}", headers=ANTHROPIC_AUTH)
        assert polled.status_code == 200
        batch = polled.json()
        strictly(MessageBatch, batch)
    listed = client.get(f"{url}?limit=5", headers=ANTHROPIC_AUTH).json()
    assert isinstance(listed["has_more"], bool)
    for item in listed["data"]:
        strictly(MessageBatch, item)

    results = client.get(batch["results_url"], headers=ANTHROPIC_AUTH)
    assert results.status_code == 200
    kinds = []
    for line in _lines(results.content):
        strictly(MessageBatchIndividualResponse, line)
        kinds.append(line["result"]["type"])
        if line["result"]["type"] == "succeeded":
            strictly(Message, line["result"]["message"])
        elif line["result"]["type"] == "errored":
            anthropic_error(line["result"]["error"])
    assert sorted(kinds) == ["errored", "expired", "succeeded", "succeeded"]


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status"),
    [
        ("GET", "/v1/batches/batch_unknown", {}, 404),
        ("GET", "/v1/files/file-unknown/content", {}, 404),
        ("POST", "/v1/files", {"files": {"file": ("b.jsonl", b"{}")}}, 400),
        ("POST", "/v1/batches", {"json": {"endpoint": "/v1/embeddings"}}, 400),
        ("POST", "/v1/batches", {"json": {}, "headers": {}}, 401),
        ("GET", "/v1/messages/batches/msgbatch_unknown", {}, 404),
        ("POST", "/v1/messages/batches", {"json": {"requests": []}}, 400),
        ("POST", "/v1/messages/batches", {"json": {}, "headers": {"anthropic-version": "x"}}, 401),
        ("POST", "/v1/messages/batches", {"json": {}, "headers": {"x-api-key": KEY}}, 400),
    ],
)
def test_batch_refusals_are_the_apis_errors(
    server: LLMServer,
    client: httpx.Client,
    method: str,
    path: str,
    kwargs: dict[str, Any],
    status: int,
) -> None:
    anthropic = path.startswith("/v1/messages/")
    kwargs = {"headers": ANTHROPIC_AUTH if anthropic else OPENAI_AUTH, **kwargs}
    response = client.request(method, f"{server.root_url}{path}", **kwargs)
    assert response.status_code == status, response.text
    (anthropic_error if anthropic else openai_error)(response.json())


def test_a_refused_batch_creation_is_the_apis_error(
    server: LLMServer, client: httpx.Client
) -> None:
    server.batch_create_errors = 2
    answers = [
        client.post(
            f"{server.root_url}/v1/messages/batches",
            headers=ANTHROPIC_AUTH,
            json={"requests": [{"custom_id": "a", "params": anthropic_body()}]},
        ),
        client.post(
            f"{server.base_url}/batches",
            headers=OPENAI_AUTH,
            json={"input_file_id": "f", "endpoint": "/v1/chat/completions"},
        ),
    ]
    assert [a.status_code for a in answers] == [500, 500]
    anthropic_error(answers[0].json())
    openai_error(answers[1].json())


def test_an_embeddings_answer_is_the_sdk_type(server: LLMServer, client: httpx.Client) -> None:
    body = {"model": "text-embedding-3-small", "input": ["a refund", "refund"]}
    response = client.post(f"{server.base_url}/embeddings", json=body, headers=OPENAI_AUTH)
    assert response.status_code == 200
    strictly(CreateEmbeddingResponse, response.json())
    refused = client.post(f"{server.base_url}/embeddings", json=body)
    assert refused.status_code == 401
    openai_error(refused.json())
