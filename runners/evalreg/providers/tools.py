"""Tool calls: the functions a task declares, and the calls a model made, provider-neutral.

Each provider writes the declarations and earlier tool turns in its own form (its
``body``) and reads the calls back into ``ToolCall`` values (its ``parse``). A
conversation's tool turns reach ``body`` as messages: an assistant turn may carry
``tool_calls`` (``[{id, name, arguments}]``, arguments a JSON object); a ``tool`` turn
carries ``tool_call_id``, the ``name`` of the tool it answers and its ``content``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evalreg.registry import schema


@dataclass(frozen=True)
class Toolset:
    """What a request declares: the task's tools and its tool choice (None: the default)."""

    tools: tuple[schema.Tool, ...]
    choice: str | None = None

    def functions(self, schema_key: str = "parameters") -> list[dict[str, Any]]:
        """Each tool, in the task's order, as ``{name, description, <schema_key>:
        parameters}`` (``description`` only when the task gives one)."""
        out = []
        for tool in self.tools:
            function: dict[str, Any] = {"name": tool.name}
            if tool.description is not None:
                function["description"] = tool.description
            function[schema_key] = tool.parameters
            out.append(function)
        return out


def toolset(task: schema.Task) -> Toolset | None:
    """The tools ``task``'s requests carry, or None when it declares none."""
    if not task.tools:
        return None
    return Toolset(tuple(task.tools), task.tool_choice)


@dataclass(frozen=True)
class ToolCall:
    """One call the model made: the tool's name and its arguments as a JSON object.

    ``error`` says why the arguments are not one (a provider that sends them as a JSON
    string, and the model wrote invalid JSON): ``arguments`` is then the string as sent.
    """

    name: str
    arguments: Any
    id: str | None = None
    error: str | None = None

    def as_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {"name": self.name, "arguments": self.arguments}
        if self.id is not None:
            record["id"] = self.id
        if self.error is not None:
            record["error"] = self.error
        return record

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> ToolCall:
        return cls(data["name"], data.get("arguments"), data.get("id"), data.get("error"))


def decoded(name: str, arguments: Any, call_id: Any = None) -> ToolCall:
    """A call whose ``arguments`` came as a JSON string (OpenAI's form) or an object."""
    ident = call_id if isinstance(call_id, str) else None
    if not isinstance(name, str):
        raise TypeError("a tool call has no name")
    if isinstance(arguments, dict):
        return ToolCall(name, arguments, ident)
    if not isinstance(arguments, str):
        return ToolCall(name, arguments, ident, "arguments are not a JSON object")
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except (json.JSONDecodeError, RecursionError) as exc:
        problem = getattr(exc, "msg", type(exc).__name__)
        return ToolCall(name, arguments, ident, f"arguments are not JSON ({problem})")
    if not isinstance(value, dict):
        return ToolCall(name, arguments, ident, "arguments are not a JSON object")
    return ToolCall(name, value, ident)


def arguments_json(arguments: dict[str, Any]) -> str:
    """Arguments as the JSON string OpenAI's APIs carry: compact, keys in the item's order."""
    return json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)


def has_tool_turns(messages: list[dict[str, Any]]) -> bool:
    """Whether a conversation holds earlier tool calls or results."""
    return any(m["role"] == "tool" or "tool_calls" in m for m in messages)


def call_text(call: Mapping[str, Any]) -> str:
    """A stored tool call as one line for a reader: ``name({"arg": ...})``, and why its
    arguments did not parse (arguments that did not parse are shown as sent)."""
    arguments = call.get("arguments")
    shown = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    why = f"  ({call['error']})" if call.get("error") else ""
    return f"{call.get('name')}({shown}){why}"
