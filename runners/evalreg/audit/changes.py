"""What changed between two versions of a rubric, task, model pin or eval set, in a few words.

The audit record lists these phrases beside each commit ("criterion `label` removed",
"`params.temperature` 0 → 0.7", "md5 a3b206c1… → 5f0e…, 120 → 118 items"). They compare
parsed content, so a reformatted file that means the same says nothing; where no cheap
phrase fits, the phrase is "changed".
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from evalreg.text.numbers import exact, plural

MAX_PHRASES = 8
# A longer value (a prompt template, a JSON schema) is named as changed, not quoted.
_MAX_VALUE_CHARS = 60
# List fields whose elements carry an ``id``: their elements are compared by id.
_ELEMENTS = {"criteria": "criterion", "failure_modes": "failure mode", "candidates": "candidate"}
_FIELD_NAMES = {"model": "snapshot id"}


@dataclass(frozen=True)
class EvalsetVersion:
    """One version of an eval set, as far as git and the local DVC cache tell."""

    path: str
    tracked: Literal["git", "dvc", "missing"]
    md5: str | None
    items: int | None
    """Non-blank lines; None when the data is neither in git nor in the local DVC cache."""


def describe(old: BaseModel | None, new: BaseModel | None) -> tuple[str, ...]:
    """Phrases saying how ``new`` differs from ``old`` (None: the file does not exist)."""
    if old is None:
        return ("created",) if new is not None else ()
    if new is None:
        return ("removed",)
    before, after = _flat(_dump(old)), _flat(_dump(new))
    phrases: list[str] = []
    gone = {e for e in before.entities if e not in after.entities}
    came = {e for e in after.entities if e not in before.entities}
    phrases += [f"{_entity(e)} removed" for e in sorted(gone, key=before.entities.index)]
    phrases += [f"{_entity(e)} added" for e in sorted(came, key=after.entities.index)]
    whole = gone | came
    for key in _union(before.leaves, after.leaves):
        if any(key == e or key.startswith(f"{e}.") for e in whole):
            continue
        old_value, new_value = before.leaves.get(key), after.leaves.get(key)
        if old_value == new_value:
            continue
        phrases.append(_leaf_phrase(key, old_value, new_value))
    if not phrases and old != new:
        phrases.append("changed")
    return _cut(phrases)


def describe_evalset(old: EvalsetVersion | None, new: EvalsetVersion) -> tuple[str, ...]:
    """Phrases for an eval set's new version; ``old`` None: first referenced by a task."""
    if new.tracked == "missing":
        return ("missing: neither the file nor its .dvc pointer is committed",)
    if old is None or old.tracked == "missing":
        return (f"md5 {_md5(new.md5)}, {_items(new.items)}",)
    phrases = []
    if old.tracked != new.tracked:
        phrases.append("now tracked by DVC" if new.tracked == "dvc" else "now tracked by git")
    if old.md5 != new.md5:
        count = (
            f"{old.items} → {new.items} items"
            if old.items is not None and new.items is not None
            else f"{_items(old.items)} → {_items(new.items)}"
        )
        phrases.append(f"md5 {_md5(old.md5)} → {_md5(new.md5)}, {count}")
    return tuple(phrases) or ("changed",)


def count_items(data: bytes) -> int:
    """How many items a JSONL eval set holds: its non-blank lines."""
    return _count_items([data])


def count_items_in(path: Path) -> int:
    """``count_items`` of the file at ``path``, read a block at a time (an eval set of a
    million items is not held, nor split into a million lines at once)."""
    with path.open("rb") as f:
        return _count_items(iter(functools.partial(f.read, _BLOCK), b""))


_BLOCK = 1 << 20


def _count_items(blocks: Iterable[bytes]) -> int:
    count, rest = 0, b""
    for block in blocks:
        block = rest + block
        # Cut after the last line break: a line split across two blocks is counted once. A
        # CR LF so split leaves a blank line, which is not counted.
        cut = max(block.rfind(b"\n"), block.rfind(b"\r")) + 1
        count += sum(1 for line in block[:cut].splitlines() if line.strip())
        rest = block[cut:]
    return count + bool(rest.strip())


# ---------------------------------------------------------------- flattening
@dataclass
class _Flat:
    leaves: dict[str, Any]
    entities: list[str]


def _dump(model: BaseModel) -> Any:
    data = model.model_dump(mode="json", by_alias=True)
    # The file format version is not content: an upgraded file means the same.
    if isinstance(data, dict):
        data.pop("schema_version", None)
    return data


def _flat(value: Any) -> _Flat:
    flat = _Flat({}, [])
    _walk(value, "", flat)
    return flat


def _walk(value: Any, path: str, flat: _Flat) -> None:
    if isinstance(value, dict) and value:
        for key in value:
            _walk(value[key], f"{path}.{key}" if path else str(key), flat)
        return
    name = path.rsplit(".", 1)[-1]
    if (
        name in _ELEMENTS
        and isinstance(value, list)
        and all(isinstance(v, dict) and isinstance(v.get("id"), str) for v in value)
    ):
        for element in value:
            at = f"{path}[{element['id']}]"
            flat.entities.append(at)
            _walk({k: v for k, v in element.items() if k != "id"}, at, flat)
        if not value:
            flat.leaves[path] = []
        return
    flat.leaves[path] = value


def _union(first: dict[str, Any], second: dict[str, Any]) -> list[str]:
    return [*first, *(k for k in second if k not in first)]


# ---------------------------------------------------------------- phrases
def _entity(path: str) -> str:
    """``criteria[label]`` as "criterion `label`"; nested paths keep their outer parts."""
    head, _, ident = path.rpartition("[")
    prefix, _, field = head.rpartition(".")
    noun = _ELEMENTS.get(field, field)
    outer = f"{_field(prefix)} " if prefix else ""
    return f"{outer}{noun} `{ident.rstrip(']')}`"


def _field(path: str) -> str:
    """A leaf's path for a reader: element ids spelled out, the rest as a dotted name."""
    if "[" in path:
        entity_end = path.rindex("]") + 1
        rest = path[entity_end:].lstrip(".")
        return f"{_entity(path[:entity_end])}" + (f" `{rest}`" if rest else "")
    return _FIELD_NAMES.get(path, f"`{path}`")


def _leaf_phrase(key: str, old: Any, new: Any) -> str:
    field = _field(key)
    if old is None and new is not None:
        shown = _value(new)
        return f"{field} set to {shown}" if shown is not None else f"{field} set"
    if new is None and old is not None:
        return f"{field} removed"
    before, after = _value(old), _value(new)
    if before is None or after is None:
        return f"{field} changed"
    return f"{field} {before} → {after}"


def _value(value: Any) -> str | None:
    """``value`` as short text, or None when it is too long to quote usefully."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, int | float):
        text = exact(value)
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= _MAX_VALUE_CHARS and "\n" not in text else None


def _cut(phrases: list[str]) -> tuple[str, ...]:
    if len(phrases) <= MAX_PHRASES:
        return tuple(phrases)
    more = len(phrases) - MAX_PHRASES + 1
    return (*phrases[: MAX_PHRASES - 1], f"and {more} more")


def _md5(md5: str | None) -> str:
    return md5[:12] if md5 else "unknown"


def _items(items: int | None) -> str:
    return (
        plural(items, "item") if items is not None else "item count unknown (not in the DVC cache)"
    )
