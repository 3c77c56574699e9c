"""Render what a model receives for one item: system prompt plus template, or a conversation."""

from __future__ import annotations

from evalreg.providers.base import Messages
from evalreg.registry.schema import Item, PromptVariant, Task
from evalreg.templating import render


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


def render_messages(task: Task, variant: PromptVariant | None, item: Item) -> Messages:
    """The chat messages for ``item``: system first, then the rendered prompt or the turns."""
    system, template = effective_prompt(task, variant)
    context = item.input or {}
    messages: Messages = []
    if system:
        messages.append({"role": "system", "content": render(system, context)})
    if item.messages is not None:
        messages.extend({"role": m.role, "content": m.content} for m in item.messages)
    else:
        messages.append({"role": "user", "content": render(template, context)})
    return messages
