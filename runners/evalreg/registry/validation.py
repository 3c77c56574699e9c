"""Turn pydantic validation errors into findings that point at the offending YAML."""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from evalreg.registry.diagnostics import Finding
from evalreg.registry.yamlio import Document, Loc

M = TypeVar("M", bound=BaseModel)


def validate(
    doc: Document, model: type[M], data: Any | None = None
) -> tuple[M | None, list[Finding]]:
    """Validate ``data`` (default: ``doc.data``) as ``model``; findings carry YAML positions."""
    payload = doc.data if data is None else data
    try:
        return model.model_validate(payload), []
    except ValidationError as exc:
        return None, [_finding(doc, model, payload, err) for err in exc.errors()]


def describe_errors(model: type[BaseModel], payload: Any, exc: ValidationError) -> list[str]:
    """Messages for a validation error of an input without positions (a JSONL line)."""
    return [_message(model, payload, err) for err in exc.errors()]


def _finding(doc: Document, model: type[BaseModel], payload: Any, err: Any) -> Finding:
    loc = _data_loc(payload, _loc(err))
    key = err["type"] == "extra_forbidden"
    return doc.finding(loc, _message(model, payload, err), key=key)


def _loc(err: Any) -> tuple[Any, ...]:
    """Where the error is: a custom error may point below its field with ``ctx["at"]``
    (a credential deep inside a pin's ``params``)."""
    at = (err.get("ctx") or {}).get("at")
    return (*err["loc"], *at) if isinstance(at, tuple) else tuple(err["loc"])


def _data_loc(payload: Any, loc: tuple[Any, ...]) -> Loc:
    """Drop the parts of a pydantic location that name union members, not data."""
    out: list[str | int] = []
    node = payload
    for part in loc:
        in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if in_list or (isinstance(node, dict) and part in node):
            out.append(part)
            node = node[part]
        elif isinstance(node, dict) and isinstance(part, str) and part not in _union_tags(node):
            # A missing key (the tag of a discriminated union member is skipped instead).
            out.append(part)
            node = None
    return tuple(out)


def _union_tags(node: dict[str, Any]) -> set[str]:
    tag = node.get("type")
    return {tag} if isinstance(tag, str) else set()


def _message(model: type[BaseModel], payload: Any, err: Any) -> str:
    loc = _data_loc(payload, _loc(err))
    where = ".".join(str(p) for p in loc)
    kind = err["type"]
    if kind == "extra_forbidden":
        allowed = _allowed_keys(model, payload, loc[:-1])
        name = str(loc[-1]) if loc else "?"
        msg = f"unknown key {name!r}"
        if allowed:
            close = difflib.get_close_matches(name, allowed, n=1)
            if close:
                msg += f" (did you mean {close[0]!r}?)"
            msg += f"; expected one of: {', '.join(sorted(allowed))}"
        return msg
    if kind == "missing":
        return f"missing required key {str(loc[-1])!r}" if loc else "missing required key"
    text = err["msg"]
    if text.startswith("Value error, "):
        text = text[len("Value error, ") :]
    value = err.get("input")
    if kind not in _NO_ECHO and isinstance(value, (str, int, float, bool)):
        shown = repr(value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        text += f" (got {shown})"
    return f"{where}: {text}" if where else text


# Never quoted: "env_name", "url" and "credential" are about values that may be secrets.
_NO_ECHO = frozenset({"model_type", "dict_type", "env_name", "url", "credential"})


def _allowed_keys(model: type[BaseModel], payload: Any, loc: Loc) -> list[str]:
    """Field names (aliases) of the model that validates the mapping at ``loc``."""
    target: Any = model
    node = payload
    for part in loc:
        target = _unwrap(target, node)
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            node = None
        if isinstance(target, type) and issubclass(target, BaseModel):
            field = target.model_fields.get(str(part)) or next(
                (f for f in target.model_fields.values() if f.alias == part), None
            )
            if field is None:
                return []
            target = field.annotation
        else:
            args = typing.get_args(target)
            target = args[-1] if args else None
    target = _unwrap(target, node)
    if isinstance(target, type) and issubclass(target, BaseModel):
        return [f.alias or name for name, f in target.model_fields.items()]
    return []


def _unwrap(target: Any, node: Any) -> Any:
    """Resolve Annotated/Optional/Union wrappers, using the data to pick a union member."""
    for _ in range(10):
        origin = typing.get_origin(target)
        if origin is typing.Annotated:
            target = typing.get_args(target)[0]
        elif origin in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(target) if a is not type(None)]
            models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
            tag = node.get("type") if isinstance(node, dict) else None
            picked = [m for m in models if tag in _literal_values(m, "type")] or models or members
            target = picked[0] if len(picked) >= 1 else target
            if typing.get_origin(target) in (typing.Union, types.UnionType):
                break
        else:
            break
    return target


def _literal_values(model: type[BaseModel], name: str) -> tuple[Any, ...]:
    field = model.model_fields.get(name)
    return typing.get_args(field.annotation) if field is not None else ()
