"""Render what a model receives for one item: system prompt plus template, or a conversation."""

from __future__ import annotations

import re
import secrets
from typing import Any

from evalreg.errors import PromptError
from evalreg.providers.attachments import neutral_part
from evalreg.providers.base import Messages
from evalreg.registry.schema import Item, Message, PromptVariant, Task
from evalreg.templating import OverBudget, RenderError, render

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
    context: dict[str, Any] = item.input or {}
    messages: Messages = []
    if system:
        messages.append(
            {"role": "system", "content": _render(system, context, cell, item, "system")}
        )
    # A fresh nonce a rendering: no item text can spell a marker, and none is left in
    # what is sent, so the request is the same on every run.
    nonce = secrets.token_hex(8) if item.files else None
    if item.messages is not None:
        messages.extend(conversation(item.messages))
        nonce = None  # a conversation's turns are not rendered: nothing placed them
    else:
        if nonce is not None and ATTACHMENT_CALL not in context:
            context = {**context, ATTACHMENT_CALL: _placer(len(item.files), nonce)}
        messages.append(
            {"role": "user", "content": _render(template, context, cell, item, "template")}
        )
    if item.files:
        content = attached(messages[-1]["content"], item, nonce)
        messages[-1] = {**messages[-1], "content": content}
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


ATTACHMENT_CALL = "attachment"
"""The template function that places an item's attachment: ``{{ attachment(0) }}``."""


def _marker(nonce: str, index: str) -> str:
    return f"\x00attachment-{nonce}:{index}\x00"


def _placer(count: int, nonce: str) -> Any:
    def attachment(index: int = 0) -> str:
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count:
            raise ValueError(
                f"attachment({index!r}): the item has {count} attachment"
                f"{'' if count == 1 else 's'} (attachment(0) is the first)"
            )
        return _marker(nonce, str(index))

    return attachment


def as_text(content: str | list[dict[str, str]]) -> str:
    """A message's content as people read it: an attachment as its path and type, not
    its bytes."""
    if isinstance(content, str):
        return content
    return "".join(
        p["text"] if p["type"] == "text" else f"[attachment {p['path']} ({p['media_type']})]"
        for p in content
    )


def attached(text: str, item: Item, nonce: str | None) -> list[dict[str, str]]:
    """The content parts of a user turn holding ``item``'s attachments: each where the
    template placed it with ``attachment(i)`` (marked with ``nonce``), those it did not
    place after the text."""
    parts: list[dict[str, str]] = []
    placed: set[int] = set()
    start = 0
    pattern = f"\x00attachment-{nonce}:([0-9]+)\x00"
    markers = () if nonce is None else re.finditer(pattern, text)
    for match in markers:
        index = int(match.group(1))
        if text[start : match.start()]:
            parts.append({"type": "text", "text": text[start : match.start()]})
        parts.append(neutral_part(item.files[index]))
        placed.add(index)
        start = match.end()
    if text[start:]:
        parts.append({"type": "text", "text": text[start:]})
    parts.extend(neutral_part(f) for i, f in enumerate(item.files) if i not in placed)
    return parts


def _render(source: str, context: dict[str, object], cell: str, item: Item, part: str) -> str:
    try:
        return render(source, context)
    except RenderError as exc:
        over = isinstance(exc, OverBudget)
        raise PromptError(cell, item.id, part, PARTS[part], str(exc), over) from None
