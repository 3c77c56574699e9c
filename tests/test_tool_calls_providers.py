"""Each provider's form of tools, tool choices and earlier tool turns, and the calls it
parses back, over loopback; the calls kept in the stored record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalreg.prompting import conversation
from evalreg.providers.base import Completion
from evalreg.providers.tools import ToolCall, Toolset, decoded
from evalreg.registry.schema import Item, Tool

from conftest import LIVE_KEY
from support.cloud_servers import BedrockServer, GeminiServer
from support.llm_server import LLMServer
from support.provider_calls import completion, pin_of

WEATHER = Tool(
    name="get_weather",
    description="The forecast for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
TIME = Tool(name="get_time")
CALLS = [{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}]

ITEM = Item.validate(
    {
        "id": "conv",
        "messages": [
            {"role": "system", "content": "Use the tools."},
            {"role": "user", "content": "Weather in Oslo and the time there?"},
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c1", "name": "get_weather", "arguments": {"city": "Oslo"}},
                    {"id": "c2", "name": "get_time", "arguments": {}},
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "-3 C"},
            {"role": "tool", "tool_call_id": "c2", "content": "09:00"},
        ],
    }
)
TURNS = conversation(ITEM.messages or [])


def chat_pin(provider: str, url: str, **extra: Any) -> Any:
    return pin_of(
        provider=provider, model="m-1", base_url=url, api_key_env="OPENAI_API_KEY", **extra
    )


@pytest.fixture
def llm(monkeypatch) -> Any:
    monkeypatch.setenv("OPENAI_API_KEY", LIVE_KEY)
    with LLMServer(api_key=LIVE_KEY) as srv:
        srv.tool_caller = lambda request: CALLS
        yield srv


def test_responses_api_sends_function_tools_and_items_and_parses_function_calls(llm):
    got = completion(
        chat_pin("openai_responses", llm.base_url), TURNS, Toolset((WEATHER, TIME), "get_time")
    )
    body = llm.requests[0].body
    assert body["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "The forecast for a city.",
            "parameters": WEATHER.parameters,
        },
        {"type": "function", "name": "get_time", "parameters": TIME.parameters},
    ]
    assert body["tool_choice"] == {"type": "function", "name": "get_time"}
    assert body["input"] == [
        {"role": "user", "content": "Weather in Oslo and the time there?"},
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "get_weather",
            "arguments": '{"city":"Oslo"}',
        },
        {"type": "function_call", "call_id": "c2", "name": "get_time", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "-3 C"},
        {"type": "function_call_output", "call_id": "c2", "output": "09:00"},
    ]
    assert got.tool_calls == (ToolCall("get_weather", {"city": "Oslo", "days": 2}, "call_0"),)


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("required", "required"),
        ("none", "none"),
        ("get_time", {"type": "function", "function": {"name": "get_time"}}),
    ],
)
def test_azure_chat_sends_openai_tools_and_choices(monkeypatch, choice, sent):
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-key")
    with LLMServer(api_key="azure-key") as srv:
        srv.tool_caller = lambda request: CALLS
        pin = pin_of(
            provider="azure_openai",
            model="gpt-4o",
            base_url=srv.root_url,
            api_key_env="AZURE_OPENAI_API_KEY",
            azure={"deployment": "gpt-4o", "api_version": "2024-10-21"},
        )
        got = completion(pin, TURNS, Toolset((WEATHER, TIME), choice))
        body = srv.requests[0].body
    assert body["tool_choice"] == sent
    assert body["tools"][1] == {
        "type": "function",
        "function": {"name": "get_time", "parameters": TIME.parameters},
    }
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool", "tool"]
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "c1", "content": "-3 C"}
    assert got.tool_calls[0].arguments == {"city": "Oslo", "days": 2}


def test_gemini_sends_function_declarations_and_parses_function_calls(monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-key")
    with GeminiServer(api_key="gemini-key") as srv:
        srv.tool_caller = lambda request: CALLS
        pin = pin_of(
            provider="gemini",
            model="gemini-2.5-flash",
            base_url=srv.root_url,
            api_key_env="GEMINI_API_KEY",
        )
        got = completion(pin, TURNS, Toolset((WEATHER, TIME), "required"))
        body = srv.requests[0].body
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "The forecast for a city.",
                    "parameters": WEATHER.parameters,
                },
                {"name": "get_time", "parameters": TIME.parameters},
            ]
        }
    ]
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "Weather in Oslo and the time there?"}]},
        {
            "role": "model",
            "parts": [
                {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}},
                {"functionCall": {"name": "get_time", "args": {}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"output": "-3 C"}}},
                {"functionResponse": {"name": "get_time", "response": {"output": "09:00"}}},
            ],
        },
    ]
    assert got.text == ""
    assert got.tool_calls == (ToolCall("get_weather", {"city": "Oslo", "days": 2}),)


def test_gemini_names_one_allowed_function():
    from evalreg.providers.gemini import GeminiProvider

    pin = pin_of(provider="gemini", model="g", api_key_env="GEMINI_API_KEY")
    body = GeminiProvider().body(pin, TURNS[1:2], None, Toolset((WEATHER,), "get_weather"))
    assert body["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}
    }


def test_bedrock_sends_a_tool_config_and_parses_tool_use(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "bedrock-key")
    with BedrockServer(access_key="AK", secret_key="SK", api_key="bedrock-key") as srv:
        srv.tool_caller = lambda request: CALLS
        pin = pin_of(
            provider="bedrock",
            model="anthropic.claude-3-haiku",
            base_url=srv.root_url,
            aws={"region": "us-east-1"},
            api_key_env="AWS_BEARER_TOKEN_BEDROCK",
        )
        got = completion(pin, TURNS, Toolset((WEATHER, TIME), "get_weather"))
        body = srv.requests[0].body
    assert body["toolConfig"] == {
        "tools": [
            {
                "toolSpec": {
                    "name": "get_weather",
                    "description": "The forecast for a city.",
                    "inputSchema": {"json": WEATHER.parameters},
                }
            },
            {"toolSpec": {"name": "get_time", "inputSchema": {"json": TIME.parameters}}},
        ],
        "toolChoice": {"tool": {"name": "get_weather"}},
    }
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            {"toolUse": {"toolUseId": "c1", "name": "get_weather", "input": {"city": "Oslo"}}},
            {"toolUse": {"toolUseId": "c2", "name": "get_time", "input": {}}},
        ],
    }
    assert body["messages"][2] == {
        "role": "user",
        "content": [
            {"toolResult": {"toolUseId": "c1", "content": [{"text": "-3 C"}]}},
            {"toolResult": {"toolUseId": "c2", "content": [{"text": "09:00"}]}},
        ],
    }
    assert got.finish_reason == "tool_use"
    assert got.tool_calls == (ToolCall("get_weather", {"city": "Oslo", "days": 2}, "tooluse_0"),)


def test_anthropic_choices():
    from evalreg.providers.anthropic import AnthropicProvider

    pin = pin_of(provider="anthropic", model="claude", api_key_env="ANTHROPIC_API_KEY")
    for choice, sent in [
        ("auto", {"type": "auto"}),
        ("required", {"type": "any"}),
        ("none", {"type": "none"}),
        ("get_time", {"type": "tool", "name": "get_time"}),
    ]:
        body = AnthropicProvider().body(pin, TURNS[1:2], None, Toolset((WEATHER, TIME), choice))
        assert body["tool_choice"] == sent


def test_a_body_without_tools_is_unchanged():
    """Tasks without tools send the bytes they always sent (their keys stand)."""
    from evalreg.providers import all_providers

    messages = [{"role": "user", "content": "hi"}]
    for name, provider in all_providers().items():
        if name in ("python", "azure_openai", "bedrock", "http"):
            continue  # their bodies are their own (http: the pin's body, no tools at all)
        pin = pin_of(provider=name, model="m", api_key_env="K")
        body = provider.body(pin, messages, None)
        assert body == provider.body(pin, messages, None, None)
        assert not {"tools", "tool_choice", "toolConfig"} & set(body)


def test_arguments_that_are_not_json_are_recorded_not_raised():
    bad = decoded("get_time", '{"zone": ', "call_1")
    assert bad.error is not None and bad.error.startswith("arguments are not JSON")
    assert bad.arguments == '{"zone": '
    assert decoded("f", "[1, 2]").error == "arguments are not a JSON object"
    assert decoded("f", "").arguments == {}
    kept = Completion("", tool_calls=(bad, ToolCall("get_weather", {"city": "Oslo"}, "c2")))
    assert Completion.from_record(kept.as_record()) == kept
    assert "tool_calls" not in Completion("plain").as_record()


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        (
            [{"role": "tool", "tool_call_id": "nope", "content": "x"}],
            "answers no earlier tool call",
        ),
        ([{"role": "tool", "content": "x"}], "names its call's 'tool_call_id'"),
        ([{"role": "user"}], "a message has 'content'"),
        (
            [
                {
                    "role": "user",
                    "content": "x",
                    "tool_calls": [{"id": "c", "name": "f", "arguments": {}}],
                }
            ],
            "only an 'assistant' message",
        ),
    ],
)
def test_bad_tool_turns_are_refused(messages, message):
    with pytest.raises(ValueError, match=message):
        Item.validate({"id": "x", "messages": messages})


def test_a_python_system_receives_the_tools_and_may_return_calls(tmp_path: Path):
    from evalreg.providers.python import PythonProvider

    (tmp_path / "router.py").write_text(
        "def answer(request):\n"
        "    names = [t['name'] for t in request['tools']]\n"
        "    return {'text': request['tool_choice'],\n"
        "            'tool_calls': [{'name': names[0], 'arguments': '{\"city\": \"Oslo\"}'}]}\n"
    )
    provider = PythonProvider(tmp_path)
    pin = pin_of(
        provider="python", callable="router.py:answer", price={"per_call": 0, "as_of": "2026-01-01"}
    )
    plain = provider.body(pin, TURNS[1:2], None)
    assert "tools" not in plain and "tool_choice" not in plain
    body = provider.body(pin, TURNS[1:2], None, Toolset((WEATHER,), "required"))
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "The forecast for a city.",
            "parameters": WEATHER.parameters,
        }
    ]
    got, _ = provider.call(pin, body)
    assert got.text == "required"
    assert got.tool_calls == (ToolCall("get_weather", {"city": "Oslo"}),)
