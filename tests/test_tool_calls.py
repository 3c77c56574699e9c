"""Tool calls end to end: a task's tools in each provider's request, the calls parsed,
stored and graded, conversations holding earlier tool turns, and bad declarations found
by ``check``."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from test_judges_human import JUDGE_PIN

from conftest import LIVE_KEY, Repo, assert_refused
from support.llm_server import LLMServer

TASK = """\
schema_version: 1
description: Route a question to the right tool.
evalset: evalsets/weather.jsonl
prompt:
  system: Use the tools.
  template: "{{ question }}"
rubric: routing
tools:
  - name: get_weather
    description: The forecast for a city.
    parameters:
      type: object
      required: [city]
      properties:
        city: {type: string}
        days: {type: integer, minimum: 1}
  - name: get_time
    parameters:
      type: object
      required: [zone]
      properties:
        zone: {type: string}
tool_choice: auto
"""

RUBRIC = """\
schema_version: 1
description: The right tool with the right arguments.
version: "1"
criteria:
  - id: tool
    description: The right tool, or none.
    critical: true
    grader: {type: tool_choice}
  - id: city
    description: The city asked about.
    slices: [weather]
    grader: {type: tool_argument, argument: city, ignore_case: true}
  - id: days
    description: The days asked about, within one.
    slices: [weather]
    grader: {type: tool_argument, argument: days, tolerance: 1}
  - id: schema
    description: Arguments valid against the declared parameters.
    slices: [weather, time]
    grader: {type: json_schema, parse: tool_arguments}
  - id: calls
    description: Every expected call, nothing more.
    grader: {type: tool_calls_f1, threshold: 0.9}
"""

SELECTION = """\
schema_version: 1
use_case: Tool routing
task: routing
candidates:
  - id: mini
    pin: mini
  - id: claude
    pin: claude
policy:
  gates:
    - metric: pass_rate
      min: 0.1
  objective:
    lexicographic:
      - maximize: pass_rate
selected: mini
rationale: Baseline.
"""

PIN_ANTHROPIC = """\
schema_version: 1
provider: anthropic
model: claude-sonnet-4-5-20250929
base_url: {url}
api_key_env: ANTHROPIC_API_KEY
params:
  max_tokens: 256
price:
  input_per_mtok: 3
  output_per_mtok: 15
  as_of: 2026-01-01
"""

ITEMS: list[dict[str, Any]] = [
    {
        "id": "w-paris",
        "input": {"question": "Weather in Paris for 3 days?"},
        "expected": {
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]
        },
        "tags": ["weather"],
    },
    {
        "id": "w-tokyo",
        "input": {"question": "What time is it in Tokyo?"},
        "expected": {"tool_calls": [{"name": "get_time", "arguments": {"zone": "Asia/Tokyo"}}]},
        "tags": ["time"],
    },
    {
        "id": "w-hello",
        "input": {"question": "Hello!"},
        "expected": {"tool_calls": []},
        "tags": ["chat"],
    },
    {
        "id": "w-bergen",
        "messages": [
            {"role": "user", "content": "Weather in Oslo?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c1", "name": "get_weather", "arguments": {"city": "Oslo"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": '{"temp": -3}'},
            {"role": "assistant", "content": "It is -3 in Oslo."},
            {"role": "user", "content": "And in Bergen for 2 days?"},
        ],
        "expected": {
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "Bergen", "days": 2}}]
        },
        "tags": ["weather"],
    },
]


def last_text(request: Any) -> str:
    """The last user text of a chat or Messages request (blocks joined)."""
    content = request.body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return " ".join(b.get("text", "") for b in content if b.get("type") == "text")


def calls_for(request: Any) -> list[dict[str, Any]]:
    """The loopback model: Paris and Bergen get the forecast (Bergen one call too many),
    Tokyo the time (its arguments invalid JSON where the protocol sends a string), hello
    no call."""
    text = last_text(request)
    openai = request.protocol == "openai"
    if "Paris" in text:
        return [{"name": "get_weather", "arguments": {"city": "paris", "days": 4}}]
    if "Tokyo" in text:
        arguments = '{"zone": "Asia/Tokyo"' if openai else {"zone": "Asia/Tokyo"}
        return [{"name": "get_time", "arguments": arguments}]
    if "Bergen" in text:
        return [
            {"name": "get_weather", "arguments": {"city": "Bergen", "days": 2}},
            {"name": "get_time", "arguments": {"zone": "Europe/Oslo"}},
        ]
    return []


@pytest.fixture
def tooled(live: Repo, server: LLMServer, cli, monkeypatch) -> Repo:
    monkeypatch.setenv("ANTHROPIC_API_KEY", LIVE_KEY)
    server.responder = lambda request: "Hi!"
    server.tool_caller = calls_for
    for rel in ("registry/tasks/labels.yaml", "registry/selections/labels.yaml"):
        (live.root / rel).unlink()
    live.write("registry/tasks/routing.yaml", TASK)
    live.write("registry/rubrics/routing.yaml", RUBRIC)
    live.write("registry/selections/routing.yaml", SELECTION)
    live.write("registry/models/claude.yaml", PIN_ANTHROPIC.format(url=server.root_url))
    path = live.write(
        "evalsets/weather.jsonl", "".join(json.dumps(i, sort_keys=True) + "\n" for i in ITEMS)
    )
    assert cli(live, "evalset", "add", str(path)).code == 0
    live.commit("a tool-routing task")
    return live


def records(repo: Repo, candidate: str) -> dict[str, dict[str, Any]]:
    path = repo.root / f"reports/results/routing/{candidate}.items.jsonl"
    return {r["item"]: r for r in map(json.loads, path.read_text().splitlines())}


def verdicts(record: dict[str, Any]) -> dict[str, bool]:
    return {cid: v["passed"] for cid, v in record["criteria"].items()}


def test_tools_are_sent_parsed_stored_and_graded_end_to_end(tooled: Repo, cli, server):
    result = cli(tooled, "run")
    assert result.code in (0, 1), result.out + result.err

    chat = [r for r in server.requests if r.protocol == "openai"]
    messages_api = [r for r in server.requests if r.protocol == "anthropic"]
    assert len(chat) == len(messages_api) == 4
    for request in chat:
        assert request.body["tool_choice"] == "auto"
        assert request.body["tools"][0] == {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The forecast for a city.",
                "parameters": {
                    "type": "object",
                    "required": ["city"],
                    "properties": {
                        "city": {"type": "string"},
                        "days": {"type": "integer", "minimum": 1},
                    },
                },
            },
        }
        assert "description" not in request.body["tools"][1]["function"]
    for request in messages_api:
        assert request.body["tool_choice"] == {"type": "auto"}
        assert request.body["tools"][0]["name"] == "get_weather"
        assert request.body["tools"][0]["input_schema"]["required"] == ["city"]
        assert set(request.body["tools"][1]) == {"name", "input_schema"}

    # The conversation's earlier tool turns, each in its provider's form.
    (chat_turns,) = [r.body["messages"] for r in chat if "Bergen" in last_text(r)]
    assert chat_turns[2] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
            }
        ],
    }
    assert chat_turns[3] == {"role": "tool", "tool_call_id": "c1", "content": '{"temp": -3}'}
    (anthropic_turns,) = [r.body["messages"] for r in messages_api if "Bergen" in last_text(r)]
    assert [t["role"] for t in anthropic_turns] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert anthropic_turns[1]["content"] == [
        {"type": "tool_use", "id": "c1", "name": "get_weather", "input": {"city": "Oslo"}}
    ]
    assert anthropic_turns[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": '{"temp": -3}'}
    ]

    for candidate in ("mini", "claude"):
        got = records(tooled, candidate)
        assert got["w-paris"]["tool_calls"] == ["get_weather"]
        assert verdicts(got["w-paris"]) == {
            "tool": True,
            "city": True,  # "paris" for "Paris", case ignored
            "days": True,  # 4 for 3, within one
            "schema": True,
            "calls": False,  # the arguments differ from the expected call's
        }
        assert "tool_calls" not in got["w-hello"]
        assert verdicts(got["w-hello"]) == {"tool": True, "calls": True}
        bergen = got["w-bergen"]
        assert bergen["tool_calls"] == ["get_weather", "get_time"]
        assert verdicts(bergen)["tool"] and verdicts(bergen)["city"] and verdicts(bergen)["days"]
        assert bergen["criteria"]["calls"]["score"] == pytest.approx(2 / 3, abs=1e-6)
        assert 'extra ["get_time"]' in bergen["criteria"]["calls"]["detail"]

    # Invalid JSON arguments are recorded as such, and fail the argument checks.
    tokyo = records(tooled, "mini")["w-tokyo"]
    assert tokyo["tool_calls"] == ["get_time"]
    assert verdicts(tokyo) == {"tool": True, "schema": False, "calls": False}
    assert "arguments are not JSON" in tokyo["criteria"]["schema"]["detail"]
    assert verdicts(records(tooled, "claude")["w-tokyo"]) == {
        "tool": True,
        "schema": True,
        "calls": True,
    }

    # The same registry sends the same bytes: a second run buys nothing, and the
    # committed results reproduce from the stored responses.
    sent = len(server.requests)
    assert cli(tooled, "run").code in (0, 1)
    assert len(server.requests) == sent
    tooled.commit("results")
    reproduced = cli(tooled, "reproduce", "HEAD")
    assert reproduced.code == 0, reproduced.out + reproduced.err
    clone = tooled.root.parent / "clone"
    subprocess.run(["git", "clone", "-q", str(tooled.root), str(clone)], check=True)
    server.requests.clear()
    from_clone = cli(clone, "reproduce", "HEAD")
    assert from_clone.code == 0, from_clone.out + from_clone.err
    assert server.requests == []


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda t: t.replace(
                "    parameters:\n      type: object\n      required: [zone]",
                "    parameters:\n      type: 7\n      required: [zone]",
            ),
            "19:7: tools.1.parameters: not a valid JSON schema",
        ),
        (
            lambda t: t.replace("name: get_time", "name: get_weather"),
            "17:11: tools.1.name: tool 'get_weather' is declared twice",
        ),
        (
            lambda t: t.replace("tool_choice: auto", "tool_choice: get_news"),
            "23:14: tool_choice: tool_choice 'get_news' is not a declared tool",
        ),
    ],
    ids=["invalid-schema", "duplicate-name", "unknown-choice"],
)
def test_bad_tool_declarations_are_check_findings(repo: Repo, cli, edit, message):
    repo.write(
        "registry/tasks/labels.yaml",
        edit(
            TASK.replace("evalsets/weather.jsonl", "evalsets/messages.jsonl").replace(
                "rubric: routing", "rubric: labels"
            )
        ),
    )
    repo.commit("bad tools")
    assert_refused(repo, cli, "check", expect=(f"registry/tasks/labels.yaml:{message}",))


def test_a_rubric_grading_tool_calls_needs_a_task_with_tools(repo: Repo, cli):
    rubric = repo.read("registry/rubrics/labels.yaml").replace(
        "criteria:\n",
        "criteria:\n  - id: tool\n    description: The tool.\n    grader: {type: tool_choice}\n",
    )
    repo.write("registry/rubrics/labels.yaml", rubric)
    repo.commit("a tool criterion")
    err = assert_refused(repo, cli, "check", expect=("criterion 'tool' grades tool calls",))
    assert "registry/tasks/labels.yaml:" in err


JUDGED = """\
  - id: sensible
    description: The call fits the question.
    grader:
      type: llm_judge
      judge: judge
      prompt_version: v1
      prompt: |
        Question: {{ input | tojson }}
        Answer: {{ output }}
        Calls: {{ tool_calls | tojson }}
"""


def test_a_judge_sees_the_tool_calls_and_show_prints_them(tooled: Repo, cli, server):
    from evalreg.graders.llm_judge import JUDGE_INSTRUCTIONS

    def is_judge(request: Any) -> bool:
        return request.body["messages"][0]["content"] == JUDGE_INSTRUCTIONS

    server.tool_caller = lambda r: [] if is_judge(r) else calls_for(r)
    server.responder = lambda r: '{"score": 1, "reason": "fits"}' if is_judge(r) else "Hi!"
    tooled.write("registry/models/judge.yaml", JUDGE_PIN.format(url=server.base_url))
    rubric = tooled.read("registry/rubrics/routing.yaml")
    tooled.write("registry/rubrics/routing.yaml", rubric + JUDGED)
    tooled.commit("a judge of the calls")
    result = cli(tooled, "run", "--candidate", "mini")
    assert result.code in (0, 1), result.out + result.err

    prompts = {
        r.body["messages"][1]["content"].split("\n")[0]: r.body["messages"][1]["content"]
        for r in server.requests
        if r.protocol == "openai" and is_judge(r)
    }
    assert len(prompts) == 4
    (paris,) = [p for q, p in prompts.items() if "Paris" in q]
    # The call the model made, name and arguments, not the provider's call id.
    calls = json.loads(paris.split("Calls: ", 1)[1])
    assert calls == [{"name": "get_weather", "arguments": {"city": "paris", "days": 4}}]
    (hello,) = [p for q, p in prompts.items() if "Hello" in q]
    assert hello.endswith("Calls: []\n")
    assert records(tooled, "mini")["w-paris"]["criteria"]["sensible"]["passed"] is True

    [view] = json.loads(cli(tooled, "show", "w-tokyo", "--candidate", "mini", "--json").out)
    (sample,) = view["candidates"][0]["samples"]
    (call,) = sample["tool_calls"]
    assert call["name"] == "get_time" and "error" in call  # its arguments were cut short
    shown = cli(tooled, "show", "w-paris", "--candidate", "mini")
    assert shown.code == 0, shown.err
    assert 'tool calls:\n  get_weather({"city": "paris", "days": 4})' in shown.out
    # A conversation's assistant turn that only called a tool shows the call it made.
    bergen = cli(tooled, "show", "w-bergen", "--candidate", "mini")
    assert '[assistant] calls get_weather({"city": "Oslo"})\n' in bergen.out
    # The judge's reason is found again, under the request the calls made.
    assert "fits" in shown.out
    # The explorer's page holds the same lines for its sample.
    assert cli(tooled, "view").code == 0
    page = tooled.read("reports/explorer/routing.html")
    start = page.index('id="explorer-data">') + len('id="explorer-data">')
    data = json.loads(page[start : page.index("</script>", start)])
    at = [i["id"] for i in data["items"]].index("w-paris")
    [explored] = data["samples"][[c["id"] for c in data["candidates"]].index("mini")][at]
    assert explored["tool_calls"] == ['get_weather({"city": "paris", "days": 4})']


def test_a_judge_prompt_without_tool_calls_renders_the_same_request_with_or_without_them(
    tooled: Repo, server
):
    from evalreg.graders.llm_judge import Judges
    from evalreg.registry.loader import load_registry

    tooled.write("registry/models/judge.yaml", JUDGE_PIN.format(url=server.base_url))
    without = JUDGED.replace("        Calls: {{ tool_calls | tojson }}\n", "")
    tooled.write(
        "registry/rubrics/routing.yaml", tooled.read("registry/rubrics/routing.yaml") + without
    )
    registry = load_registry(tooled.root)
    criterion = registry.rubrics["routing"].criteria[-1]
    item = next(i for i in registry.evalset_of("routing", "dev").items if i.id == "w-paris")
    judges = Judges(registry.pins, None)
    call = {"id": "c9", "name": "get_weather", "arguments": {"city": "Paris"}}
    plain = judges.job(criterion, item, "Hi!", "x")
    assert judges.job(criterion, item, "Hi!", "x", [call]).key == plain.key
