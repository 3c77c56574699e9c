"""What every importer shares: result, error, ids, safe YAML input and the common documents."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from evalreg.errors import UsageError
from evalreg.registry import schema

MAX_ID = 120
"""Longest id stem a slug keeps, leaving room for a ``-2`` suffix within the schema's 128."""
POLICY: dict[str, Any] = {"objective": {"lexicographic": [{"maximize": "pass_rate"}]}}
"""The default policy of an imported use case: no gates, the highest pass rate wins."""
LEVELS: dict[str, Any] = {"correct": {"require": "all"}, "acceptable": {"require": "all"}}
"""Both source tools pass a test only when every check passes; there is no middle level."""
_ID = re.compile(schema.ID_PATTERN)


class ImportProblem(UsageError):
    """The source cannot be imported as given; nothing was written."""


class NotMapped(Exception):
    """One part of the source has no evalreg equivalent; the message says why."""


@dataclass(frozen=True)
class ImportResult:
    """What an import wrote, and what it could not carry over."""

    written: tuple[str, ...]
    """Repository-relative paths of the files written, in the order written."""
    evalset: str
    """The eval set among them: ``evalreg evalset add`` tracks it with DVC."""
    not_mapped: tuple[str, ...]
    """Parts of the source that have no equivalent in the files, each ``where: why``."""
    notes: tuple[str, ...]
    """What to review although it was imported (an assumption, a default, a gap to fill)."""


@dataclass
class ImportLog:
    """Collects what did not map and what to review, each message once, in order."""

    not_mapped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def skip(self, where: str, why: str) -> None:
        message = f"{where}: {why}"
        if message not in self.not_mapped:
            self.not_mapped.append(message)

    def note(self, message: str) -> None:
        if message not in self.notes:
            self.notes.append(message)

    def result(self, written: tuple[str, ...], evalset: str) -> ImportResult:
        """The import's result; what did not map comes in source order (``tests[2]`` first)."""
        return ImportResult(
            written, evalset, tuple(sorted(self.not_mapped, key=_natural)), tuple(self.notes)
        )


class IdPool:
    """Hands out unique ids: ``gpt-4o``, then ``gpt-4o-2``, ..."""

    def __init__(self) -> None:
        self._taken: set[str] = set()

    def claim(self, stem: str) -> str:
        """``stem`` (a valid id, cut to ``MAX_ID``), with a number appended if it is taken."""
        stem = stem[:MAX_ID].rstrip("-._")
        ident, n = stem, 2
        while ident in self._taken:
            ident, n = f"{stem}-{n}", n + 1
        self._taken.add(ident)
        return ident


def _natural(text: str) -> list[Any]:
    """A sort key that orders the numbers inside ``text`` by value."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def slug(text: str) -> str:
    """``text`` as an id: lower case, runs of other characters as ``-``; '' if none is left."""
    out = re.sub(r"[^a-z0-9._-]+", "-", text.lower())
    out = re.sub(r"^[^a-z0-9]+", "", out)[:MAX_ID]
    return out.rstrip("-._")


def check_name(name: str) -> None:
    """Refuse a name that is not an id: it becomes the task, rubric, use case and eval set ids."""
    if not _ID.match(name) or len(name) > MAX_ID:
        raise ImportProblem(
            f"--name {name!r} is not an id: use up to {MAX_ID} letters, digits, '.', '_' and "
            "'-', starting with a letter or digit"
        )


def require_pin(out_root: Path, pin: str, option: str) -> None:
    """Refuse ``pin`` unless the registry at ``out_root`` has a model pin of that id."""
    models = out_root / "registry" / "models"
    if not _ID.match(pin) or not any((models / f"{pin}{s}").is_file() for s in (".yaml", ".yml")):
        raise ImportProblem(
            f"{option} {pin}: no model pin {pin!r} in {models} (add the pin first, or name one "
            "that exists)"
        )


def read_text(path: Path) -> str:
    """A source file's text (UTF-8, a BOM allowed); a file that cannot be read is a problem."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ImportProblem(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ImportProblem(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_yaml(path: Path) -> Any:
    """The data of a YAML (or JSON) file, read by ruamel's safe loader: no tags, no code."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    text = read_text(path)
    try:
        return to_plain(YAML(typ="safe", pure=True).load(text), MAX_VALUES)
    except YAMLError as exc:
        raise ImportProblem(f"{path}: not valid YAML ({' '.join(str(exc).split())})") from None
    except RecursionError:
        raise ImportProblem(f"{path}: nested too deep to read") from None
    except _TooMany:
        raise ImportProblem(
            f"{path}: holds more than {MAX_VALUES:,} values once its aliases are expanded"
        ) from None


MAX_VALUES = 1_000_000
"""Most values a source file may hold with its YAML aliases expanded: an alias of an alias
of ... a list grows exponentially (nine levels of nine make 387 million values)."""


class _TooMany(Exception):
    pass


def to_plain(value: Any, limit: int | None = None) -> Any:
    """YAML data as JSON data: dates become ISO strings, mapping keys strings. With
    ``limit``, more values than that (aliases expanded) raise ``_TooMany``."""
    left = [limit]

    def plain(v: Any) -> Any:
        if left[0] is not None:
            left[0] -= 1
            if left[0] < 0:
                raise _TooMany
        if isinstance(v, dict):
            return {str(k): plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, date):
            return v.isoformat()
        return v

    return plain(value)


def rubric_doc(description: str, criteria: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "schema_version": schema.SCHEMA_VERSION,
        "description": description,
        "version": "1",
        "criteria": criteria,
        "levels": LEVELS,
    }


def selection_doc(
    use_case: str, task: str, candidates: list[dict[str, Any]], source: str
) -> dict[str, Any]:
    """A use case over ``candidates`` with the default policy, declaring the first one."""
    return {
        "schema_version": schema.SCHEMA_VERSION,
        "use_case": " ".join(use_case.split())[:200],
        "task": task,
        "candidates": candidates,
        "policy": POLICY,
        "selected": candidates[0]["id"],
        "rationale": f"Imported from {source}; review the policy before relying on it.",
    }
