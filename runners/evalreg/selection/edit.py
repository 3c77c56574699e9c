"""``evalreg select``: change a use case's declared candidate, keeping the file's layout.

The file is edited line by line, not re-emitted: a ruamel round trip only locates the
top-level keys, and only the lines of ``selected``, ``rationale`` and (when asked) the new
waiver change. Every other byte (comments, folded and literal scalars, flow mappings,
quoting, line width, trailing spaces) is kept as it was.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evalreg.errors import UsageError
from evalreg.registry import schema
from evalreg.registry.loader import load_registry
from evalreg.selection.evidence import gather


@dataclass(frozen=True)
class Selected:
    """What ``select_candidate`` changed, and what it replaced: nobody should lose a
    rationale or a waiver without being told what it said."""

    note: str
    """The declared candidate now, and what ``check`` will say of it."""
    rationale: str | None = None
    """The rationale the file had, when the new one is not the same."""
    waiver: schema.Waiver | None = None
    """The waiver for the candidate the file had, when a new one replaced it."""


def select_candidate(
    root: Path, selection_id: str, candidate: str, *, reason: str, approver: str | None = None
) -> Selected:
    from ruamel.yaml.comments import CommentedMap
    from ruamel.yaml.scalarstring import FoldedScalarString

    registry = load_registry(root)
    if selection_id not in registry.selections:
        known = ", ".join(sorted(registry.selections)) or "none"
        raise UsageError(f"no use case {selection_id!r} (known: {known})")
    selection = registry.selections[selection_id]
    ids = [c.id for c in selection.candidates]
    if candidate not in ids:
        raise UsageError(f"{candidate!r} is not a candidate of {selection_id} ({', '.join(ids)})")
    if not reason.strip():
        raise UsageError("--reason must say why")
    recommended = gather(registry, selection_id).decision.recommended
    path = root / registry.file_of("selections", selection_id)
    text = path.read_text(encoding="utf-8")
    note = f"{selection_id}: declared candidate is now {candidate}"
    waiver: CommentedMap | None = None
    # The decision reads a candidate's first waiver: a new one takes its place.
    earlier = next((n for n, w in enumerate(selection.waivers) if w.candidate == candidate), None)
    replaced = selection.waivers[earlier] if earlier is not None else None
    if candidate != recommended:
        if approver is None:
            note += (
                f"; the policy recommends {recommended or 'no candidate'}, so `evalreg "
                "check` needs a waiver: repeat with --approver NAME"
            )
        else:
            waiver = CommentedMap()
            waiver["candidate"] = candidate
            waiver["reason"] = FoldedScalarString(reason + "\n") if len(reason) > 60 else reason
            waiver["approver"] = approver
            if replaced is not None and replaced.approver == approver and replaced.approver_login:
                waiver["approver_login"] = replaced.approver_login  # the same person's
            waiver["date"] = datetime.now(UTC).date().isoformat()
            note += f"; waiver recorded, approved by {approver}"
    if waiver is None or (replaced is not None and _same_waiver(replaced, waiver)):
        replaced = None
    edit = _Edit(text)
    rationale_folded = isinstance(edit.data.get("rationale"), FoldedScalarString)
    edit.set_scalar("selected", candidate)
    edit.set_value("rationale", FoldedScalarString(reason + "\n") if rationale_folded else reason)
    if waiver is not None and earlier is not None:
        edit.replace_item("waivers", earlier, waiver)
    elif waiver is not None:
        edit.append_item("waivers", waiver)
    path.write_text(edit.text(), encoding="utf-8")
    rationale = selection.rationale if selection.rationale.strip() != reason.strip() else None
    return Selected(note, rationale, replaced)


def _same_waiver(old: schema.Waiver, new: Any) -> bool:
    """Whether ``new`` says what ``old`` said: the same reason, approver and date."""
    return (old.reason.strip(), old.approver, old.date.isoformat()) == (
        str(new["reason"]).strip(),
        new["approver"],
        new["date"],
    )


_COMMENT = re.compile(r"\s+#")


class _Edit:
    """Line edits of a YAML mapping's top-level keys (a block mapping; a flow mapping at the
    top is re-emitted whole, the one layout this cannot keep)."""

    def __init__(self, text: str) -> None:
        from ruamel.yaml import YAML
        from ruamel.yaml.util import load_yaml_guess_indent

        _, indent, block_seq_indent = load_yaml_guess_indent(text)
        self.yaml = YAML()
        self.yaml.preserve_quotes = True
        self.yaml.width = 88
        self.yaml.indent(
            mapping=indent - block_seq_indent or 2, sequence=indent, offset=block_seq_indent
        )
        self.data: Any = self.yaml.load(text)
        self.flow = self.data.fa.flow_style()
        self.lines = text.splitlines(keepends=True)
        if self.lines and not self.lines[-1].endswith("\n"):
            self.lines[-1] += "\n"

    def text(self) -> str:
        if self.flow:
            out = io.StringIO()
            self.yaml.dump(self.data, out)
            return out.getvalue()
        return "".join(self.lines)

    def _locate(self) -> None:
        """Re-read the positions after an edit moved lines."""
        self.data = self.yaml.load("".join(self.lines))

    def _span(self, key: str) -> tuple[int, int]:
        """The lines ``[start, end)`` of ``key`` and its value, without the blank and
        comment lines that follow it (they belong with the next key)."""
        keys = list(self.data.keys())
        start = self.data.lc.key(key)[0]
        column = self.data.lc.key(key)[1]
        index = keys.index(key)
        end = self.data.lc.key(keys[index + 1])[0] if index + 1 < len(keys) else len(self.lines)
        return start, self._trimmed(start, end, column)

    def _trimmed(self, start: int, end: int, column: int) -> int:
        """``end`` moved up past the blank lines, and the comments indented no further
        than ``column``, that end the lines ``[start, end)``."""
        while end > start + 1:
            line = self.lines[end - 1]
            indented = len(line) - len(line.lstrip())
            if line.strip() and not (line.lstrip().startswith("#") and indented <= column):
                break
            end -= 1
        return end

    def _item_start(self, sequence: Any, index: int) -> int:
        """The line of the ``-`` of a block sequence's ``index``-th item (ruamel gives
        the line its content starts on, the next one for an item written ``-`` alone)."""
        line = int(sequence.lc.item(index)[0])
        while line > 0 and not self.lines[line].lstrip().startswith("-"):
            line -= 1
        return line

    def _emit(self, key: str, value: Any) -> list[str]:
        from ruamel.yaml.comments import CommentedMap

        one = CommentedMap()
        one[key] = value
        out = io.StringIO()
        self.yaml.dump(one, out)
        return out.getvalue().splitlines(keepends=True)

    def set_scalar(self, key: str, value: str) -> None:
        """``key: value`` on its one line, keeping a trailing comment at its column."""
        if self.flow or key not in self.data:
            self.set_value(key, value)
            return
        start, end = self._span(key)
        line = self.lines[start]
        value_line, value_col = self.data.lc.value(key)
        if end - start != 1 or value_line != start:
            self.set_value(key, value)
            return
        rest = line[value_col:].rstrip("\n")
        comment = _COMMENT.search(rest)
        emitted = self._emit(key, value)
        if len(emitted) != 1:
            self.set_value(key, value)
            return
        new = emitted[0].rstrip("\n")[len(key) + 2 :]
        if comment is None:
            self.lines[start] = line[:value_col] + new + "\n"
        else:
            tail = rest[comment.start() :].lstrip()
            width = max(comment.end() - 1, len(new) + 1)  # the column of its "#"
            self.lines[start] = line[:value_col] + new.ljust(width) + tail + "\n"

    def set_value(self, key: str, value: Any) -> None:
        """``key`` with ``value``, replacing the key's lines (appended when absent)."""
        if self.flow:
            self.data[key] = value
            return
        emitted = self._emit(key, value)
        if key in self.data:
            start, end = self._span(key)
            self.lines[start:end] = emitted
        else:
            self.lines.extend(emitted)
        self._locate()

    def replace_item(self, key: str, index: int, item: Any) -> None:
        """The ``index``-th item of the sequence ``key`` replaced by ``item``; the other
        items, and the comments between them, stay as they are."""
        current = self.data[key]
        if self.flow or current.fa.flow_style():
            items = list(current)
            items[index] = item
            self.set_value(key, items)
            return
        start = self._item_start(current, index)
        if index + 1 < len(current):
            dash = len(self.lines[start]) - len(self.lines[start].lstrip())
            end = self._trimmed(start, self._item_start(current, index + 1), dash)
        else:
            end = self._span(key)[1]
        self.lines[start:end] = self._emit(key, [item])[1:]
        self._locate()

    def append_item(self, key: str, item: Any) -> None:
        """``item`` added at the end of the block sequence ``key`` (created when absent)."""
        current = self.data.get(key)
        if key not in self.data and not self.flow and "rationale" in self.data:
            # A new list goes with the decision it qualifies, after its rationale.
            _, end = self._span("rationale")
            self.lines[end:end] = self._emit(key, [item])
            self._locate()
            return
        if self.flow or not current or current.fa.flow_style():
            items = list(current or [])
            self.set_value(key, [*items, item])
            return
        _, end = self._span(key)
        self.lines[end:end] = self._emit(key, [item])[1:]
        self._locate()
