"""What changed in a cell's configuration between two revisions: its pin (provider, model
snapshot, params, price, limits) and the prompt it sends (system prompt and template), each
as a dotted path with its value before and after, so a diff says "pin.params.temperature
0 → 0.2" rather than "pin"."""

from __future__ import annotations

from typing import Any

from evalreg.cells import Cell

MAX_VALUE_CHARS = 500
"""Longest value kept in a change (a whole system prompt is shown cut, with its length)."""

_PIN_FIELDS_SHOWN = (
    "provider",
    "model",
    "base_url",
    "callable",
    "files",
    "params",
    "extra_params",
    "price",
    "limits",
)
"""What of a pin can change its responses or its cost (not its description or benchmarks)."""


def config_changes(base: Cell, head: Cell) -> list[dict[str, Any]]:
    """The pin and prompt settings that differ between ``base`` and ``head``, in order:
    ``{"what": "pin.params.temperature", "base": 0, "head": 0.2}`` (a side without the
    setting has None)."""
    return [
        *_changes("pin", _pin(base), _pin(head)),
        *_changes("prompt", _prompt(base), _prompt(head)),
    ]


def _pin(cell: Cell) -> dict[str, Any]:
    dumped = cell.pin.model_dump(mode="json", exclude_defaults=True)
    return {k: dumped[k] for k in _PIN_FIELDS_SHOWN if k in dumped}


def _prompt(cell: Cell) -> dict[str, Any]:
    """The prompt the cell sends: its candidate's variant over the task's own."""
    variant = cell.candidate.prompt
    task = cell.task.prompt
    system = variant.system if variant is not None and variant.system is not None else task.system
    template = (
        variant.template if variant is not None and variant.template is not None else task.template
    )
    return {"system": system, "template": template}


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for key in sorted(value):
            _flatten(f"{prefix}.{key}", value[key], out)
    else:
        out[prefix] = value


def _changes(prefix: str, base: dict[str, Any], head: dict[str, Any]) -> list[dict[str, Any]]:
    flat_base: dict[str, Any] = {}
    flat_head: dict[str, Any] = {}
    _flatten(prefix, base, flat_base)
    _flatten(prefix, head, flat_head)
    out = []
    for what in sorted(set(flat_base) | set(flat_head)):
        b, h = flat_base.get(what), flat_head.get(what)
        if b != h:
            out.append({"what": what, "base": _kept(b), "head": _kept(h)})
    return out


def _kept(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_VALUE_CHARS:
        return value[: MAX_VALUE_CHARS - 1] + "…"
    return value
