"""Safe YAML reading that keeps positions and refuses what a registry file must not hold.

The document is built from ruamel.yaml's event stream rather than its constructor, so
one linear pass can reject tags, anchors and aliases (no alias is ever expanded),
duplicate keys and excessive nesting, while recording the 1-based position of every
key and value for precise error messages.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import (
    AliasEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)

from evalreg.errors import RegistryError
from evalreg.registry.diagnostics import Finding
from evalreg.registry.tree import decode_utf8

MAX_BYTES = 256 << 10
MAX_DEPTH = 64
MAX_FINDINGS = 50
_CORE = "tag:yaml.org,2002:"
_ALLOWED_TAGS = {_CORE + t for t in ("str", "int", "float", "bool", "null", "map", "seq")}

Loc = tuple[str | int, ...]
Pos = tuple[int, int]


@dataclass
class Document:
    """A parsed YAML document: plain Python data plus where each part came from."""

    path: str
    data: Any
    value_pos: dict[Loc, Pos] = field(default_factory=dict)
    key_pos: dict[Loc, Pos] = field(default_factory=dict)

    def locate(self, loc: Loc, *, key: bool = False) -> Pos:
        """Position of ``loc``, or of its nearest ancestor that has one."""
        if key and loc in self.key_pos:
            return self.key_pos[loc]
        while loc:
            if loc in self.value_pos:
                return self.value_pos[loc]
            loc = loc[:-1]
        return self.value_pos.get((), (1, 1))

    def finding(self, loc: Loc, message: str, *, key: bool = False) -> Finding:
        line, col = self.locate(loc, key=key)
        return Finding(self.path, line, col, message)


def _pos(mark: Any) -> Pos:
    return mark.line + 1, mark.column + 1


def _scalar_pos(event: ScalarEvent, text: str) -> Pos:
    """Where a scalar's text starts: for a block scalar (``|``, ``>``), the first line after
    its indicator, so that line n of a multi-line prompt is reported as its own line."""
    mark = event.start_mark
    if event.style not in ("|", ">"):
        return _pos(mark)
    lines = text.split("\n", mark.line + 2)
    first = lines[mark.line + 1] if len(lines) > mark.line + 1 else ""
    return mark.line + 2, len(first) - len(first.lstrip(" ")) + 1


def _tag_of(event: Any) -> str | None:
    tag = getattr(event, "tag", None)
    if tag is None:
        return None
    return str(getattr(tag, "value", tag))


class _Frame:
    __slots__ = ("container", "loc", "pending_key")

    def __init__(self, container: dict[Any, Any] | list[Any], loc: Loc) -> None:
        self.container = container
        self.loc = loc
        self.pending_key: tuple[Any, Pos] | None = None


def parse_yaml(data: bytes, path: str) -> Document:
    """Parse one YAML document from ``data``; raise ``RegistryError`` on anything unsafe."""
    if len(data) > MAX_BYTES:
        raise RegistryError(
            [
                Finding(
                    path,
                    0,
                    0,
                    f"file is {len(data)} bytes; registry files are limited to {MAX_BYTES} bytes",
                )
            ]
        )
    text = decode_utf8(data, path)
    yaml = _yaml()
    builder = _Builder(path, text)
    findings = builder.findings
    try:
        for event in yaml.parse(text):
            if not builder.take(event):
                break
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = _pos(mark) if mark is not None else (0, 0)
        problem = exc.problem or exc.context or "invalid YAML"
        findings.append(Finding(path, line, col, f"YAML syntax error: {problem}"))
    except YAMLError as exc:
        findings.append(Finding(path, 0, 0, f"YAML error: {exc}"))
    except RecursionError:
        findings.append(Finding(path, 0, 0, "nesting too deep to parse"))
    return builder.document()


class _Builder:
    """Builds a ``Document`` from the parser's events, one at a time (``take``), noting
    every refused construct (anchors, aliases, tags, duplicate keys) as a finding with its
    line and column, so that one error names them all."""

    def __init__(self, path: str, text: str) -> None:
        self.path, self.text = path, text
        self.doc = Document(path, None)
        self.findings: list[Finding] = []
        self.stack: list[_Frame] = []
        self.documents = 0
        self.root_set = False

    def refuse(self, pos: Pos, message: str) -> None:
        self.findings.append(Finding(self.path, *pos, message))

    def take(self, event: Any) -> bool:
        """Add ``event`` to the document; False when parsing stops here."""
        if isinstance(event, DocumentStartEvent):
            self.documents += 1
            if self.documents > 1:
                self.refuse(
                    _pos(event.start_mark), "a second YAML document: expected exactly one per file"
                )
                return False
            return True
        if len(self.findings) >= MAX_FINDINGS:
            self.refuse(_pos(event.start_mark), f"more than {MAX_FINDINGS} problems; stopped here")
            return False
        if isinstance(event, AliasEvent):
            self.refuse(
                _pos(event.start_mark),
                f"alias *{event.anchor} is not allowed: registry files may not "
                "use anchors or aliases; write the value out",
            )
            self.place(None, _pos(event.start_mark))
            return True
        tag = self.allowed_tag(event)
        if isinstance(event, ScalarEvent):
            pos = _scalar_pos(event, self.text)
            try:
                value = _scalar(event, tag)
            except ValueError as exc:
                self.refuse(pos, str(exc))
                value = None
            self.place(value, pos)
        elif isinstance(event, (MappingStartEvent, SequenceStartEvent)):
            if len(self.stack) >= MAX_DEPTH:
                self.refuse(_pos(event.start_mark), f"nesting deeper than {MAX_DEPTH} levels")
                return False
            container: dict[Any, Any] | list[Any] = (
                {} if isinstance(event, MappingStartEvent) else []
            )
            loc = self.place(container, _pos(event.start_mark))
            self.stack.append(_Frame(container, loc if loc is not None else ("\0",)))
        elif isinstance(event, (MappingEndEvent, SequenceEndEvent)):
            self.stack.pop()
        return True

    def allowed_tag(self, event: Any) -> str | None:
        """The event's tag, or None when it has none or is refused; an anchor on the event
        is refused too."""
        anchor = getattr(event, "anchor", None)
        if anchor is not None and isinstance(
            event, (ScalarEvent, MappingStartEvent, SequenceStartEvent)
        ):
            self.refuse(
                _pos(event.start_mark),
                f"anchor &{anchor} is not allowed: registry files may not use anchors or aliases",
            )
        tag = _tag_of(event)
        if (
            tag is not None
            and tag not in _ALLOWED_TAGS
            and not (isinstance(event, ScalarEvent) and tag == "!" and event.implicit[1])
        ):
            self.refuse(
                _pos(event.start_mark),
                f"YAML tag {tag.replace(_CORE, '!!')!r} is not allowed: registry files "
                "hold plain mappings, lists, strings, numbers and booleans",
            )
            return None
        return tag

    def place(self, value: Any, pos: Pos) -> Loc | None:
        """Put ``value`` where the parser is: the root, the next item of a list, or a
        mapping's key or the value of its pending key. Its location, or None for a key (or
        a value that could not be placed)."""
        doc = self.doc
        if not self.stack:
            doc.data, self.root_set = value, True
            doc.value_pos[()] = pos
            return ()
        top = self.stack[-1]
        if isinstance(top.container, list):
            loc = (*top.loc, len(top.container))
            top.container.append(value)
            doc.value_pos[loc] = pos
            return loc
        if top.pending_key is None:
            if not isinstance(value, (str, int, bool)) or isinstance(value, (dict, list)):
                self.refuse(pos, "mapping keys must be plain scalars")
                top.pending_key = (object(), pos)
                return None
            top.pending_key = (value, pos)
            return None
        key, key_pos = top.pending_key
        top.pending_key = None
        if not isinstance(key, (str, int, bool)):
            return None
        loc = (*top.loc, key)
        assert isinstance(top.container, dict)
        if key in top.container:
            first = doc.key_pos[loc]
            self.refuse(key_pos, f"duplicate key {key!r} (first defined at line {first[0]})")
            return None
        top.container[key] = value
        doc.key_pos[loc] = key_pos
        doc.value_pos[loc] = pos
        return loc

    def document(self) -> Document:
        """The document built, or ``RegistryError`` with every finding (sorted), or for a
        file that holds no mapping."""
        doc, path = self.doc, self.path
        if self.findings:
            raise RegistryError(sorted(set(self.findings)))
        if not self.root_set or doc.data is None:
            raise RegistryError([Finding(path, 1, 1, "file is empty: expected a YAML mapping")])
        if not isinstance(doc.data, dict):
            kind = "a list" if isinstance(doc.data, list) else "a single value"
            raise RegistryError(
                [
                    Finding(
                        path,
                        *doc.value_pos[()],
                        f"expected a YAML mapping at the top level, found {kind}",
                    )
                ]
            )
        return doc


def _yaml() -> YAML:
    """A safe YAML instance using libyaml's C parser when it is installed (24x faster)."""
    try:
        return YAML(typ="safe", pure=False)
    except Exception:  # pragma: no cover - the C extension is missing or broken
        return YAML(typ="safe", pure=True)


_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_INT = re.compile(r"^[-+]?[0-9]+$")
_INT_OCT = re.compile(r"^0o[0-7]+$")
_INT_HEX = re.compile(r"^0x[0-9a-fA-F]+$")
_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_INF = re.compile(r"^[-+]?\.(?:inf|Inf|INF)$")
_NAN = re.compile(r"^\.(?:nan|NaN|NAN)$")


def _plain(value: str) -> Any:
    """Resolve a plain scalar by the YAML 1.2 core schema (dates stay strings: the schema
    parses them where a date is expected)."""
    if _NULL.match(value):
        return None
    if value in _BOOL:
        return _BOOL[value]
    if _INT.match(value):
        return int(value)
    if _INT_OCT.match(value):
        return int(value[2:], 8)
    if _INT_HEX.match(value):
        return int(value[2:], 16)
    if _FLOAT.match(value):
        return float(value)
    if _INF.match(value):
        return float("-inf") if value.startswith("-") else float("inf")
    if _NAN.match(value):
        return float("nan")
    return value


def _scalar(event: ScalarEvent, tag: str | None) -> Any:
    """The value of a scalar; a ``ValueError`` says why a number cannot be used.

    Numbers must be finite and convertible: fingerprints and results are canonical JSON,
    which holds neither NaN nor infinities, and Python converts integers of at most 4,300
    digits.
    """
    if tag == _CORE + "str" or (tag is None and not event.implicit[0]):
        return event.value
    try:
        value = _plain(event.value)
        kind = tag[len(_CORE) :] if tag else ""
        expected: dict[str, tuple[type, ...]] = {
            "int": (int,),
            "float": (int, float),
            "bool": (bool,),
            "null": (type(None),),
        }
        if kind in expected and not isinstance(value, expected[kind]):
            return event.value  # an explicit tag the value does not fit: the schema reports it
        if kind == "float":
            value = float(value)
    except (ValueError, OverflowError):
        raise ValueError(
            f"a number of {len(event.value):,} characters is too large to read: write it as a "
            "string"
        ) from None
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(
            f"{event.value!r} is not a finite number: registry files hold finite numbers "
            "(fingerprints and results have no NaN or infinity)"
        )
    return value
