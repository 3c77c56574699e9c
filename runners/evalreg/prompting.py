"""Render what a model receives for one item: system prompt plus template, or a conversation."""

from __future__ import annotations

from typing import Any

from evalreg.errors import PromptError
from evalreg.providers.base import Messages
from evalreg.registry.schema import Item, Message, PromptVariant, Task
from evalreg.templating import RenderError, render

PARTS = {"system": "system prompt", "template": "prompt template"}
"""What messages call each part of a prompt."""


def effective_prompt(task: Task, variant: PromptVariant | None) -> tuple[str | None, str]:
    """(system, template) after applying a candidate's prompt variant to the task's prompt."""
    system = task.prompt.system
    template = task.prompt.template
    if variant is not None:
        if variant.system is not None:
            system = variant.system
        if variant.template is not None:
            template = variant.template
    return system, template


def render_messages(
    task: Task, variant: PromptVariant | None, item: Item, *, cell: str
) -> Messages:
    """The chat messages for ``item``: system first, then the rendered prompt or the turns.

    Raises ``PromptError`` (naming ``cell``, the item and the part) if a part cannot be
    rendered for this item.
    """
    system, template = effective_prompt(task, variant)
    context = item.input or {}
    messages: Messages = []
    if system:
        messages.append(
            {"role": "system", "content": _render(system, context, cell, item, "system")}
        )
    if item.messages is not None:
        messages.extend(conversation(item.messages))
    else:
        messages.append(
            {"role": "user", "content": _render(template, context, cell, item, "template")}
        )
    return messages


def conversation(turns: list[Message]) -> Messages:
    """An item's turns as messages; tool turns keep their calls and name the tool answered."""
    names: dict[str, str] = {}
    out: Messages = []
    for m in turns:
        message: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.tool_calls is not None:
            message["tool_calls"] = [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls
            ]
            names.update((c.id, c.name) for c in m.tool_calls)
        if m.tool_call_id is not None:
            message["tool_call_id"] = m.tool_call_id
            message["name"] = names[m.tool_call_id]  # the schema checks an earlier call made it
        out.append(message)
    return out


def _render(source: str, context: dict[str, object], cell: str, item: Item, part: str) -> str:
    try:
        return render(source, context)
    except RenderError as exc:
        raise PromptError(cell, item.id, part, PARTS[part], str(exc)) from None
