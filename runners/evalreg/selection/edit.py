"""``evalreg select``: change a use case's declared candidate, keeping the file's layout.

The file is edited line by line, not re-emitted: a ruamel round trip only locates the
top-level keys, and only the lines of ``selected``, ``rationale`` and (when asked) the new
waiver change. Every other byte (comments, folded and literal scalars, flow mappings,
quoting, line width, trailing spaces) is kept as it was.
"""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evalreg.errors import UsageError
from evalreg.registry.loader import load_registry
from evalreg.selection.evidence import gather


def select_candidate(
    root: Path, selection_id: str, candidate: str, *, reason: str, approver: str | None = None
) -> str:
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
            waiver["date"] = datetime.now(UTC).date().isoformat()
            note += f"; waiver recorded, approved by {approver}"
    edit = _Edit(text)
    rationale_folded = isinstance(edit.data.get("rationale"), FoldedScalarString)
    edit.set_scalar("selected", candidate)
    edit.set_value("rationale", FoldedScalarString(reason + "\n") if rationale_folded else reason)
    if waiver is not None:
        edit.append_item("waivers", waiver)
    path.write_text(edit.text(), encoding="utf-8")
    return note


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
        while end > start + 1:
            line = self.lines[end - 1]
            indented = len(line) - len(line.lstrip())
            if line.strip() and not (line.lstrip().startswith("#") and indented <= column):
                break
            end -= 1
        return start, end

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
