"""The outputs table (``results.export``) as a file: CSV for a spreadsheet, JSON Lines for a
notebook, written a chunk at a time as its rows are read.

A CSV text cell that a spreadsheet would run as a formula (it starts with ``=``, ``+``,
``-``, ``@``, a tab or a carriage return: OWASP's CSV injection guidance) starts with a
single quote instead; number columns stay numbers, a negative one included. CSV has no
escapes, so control characters are stripped from its text as from what reaches a terminal;
JSON Lines keeps text exact, every control character a ``\\u`` escape.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from pathlib import Path

from evalreg.results.export import NUMBERS, OutputsTable
from evalreg.store.journal import write_durably
from evalreg.text.escape import json_line, strip_controls

FORMATS = ("csv", "jsonl")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""What a CSV text cell must not start with: a spreadsheet would read a formula."""
_CHUNK = 1 << 16
"""Characters written at a time."""


def neutralised(text: str) -> str:
    """``text`` as a CSV text cell a spreadsheet shows rather than runs: controls stripped,
    and a single quote before a formula's first character."""
    formula = text.startswith(FORMULA_START)
    if not text.isprintable():  # fast for almost every cell: no control in it
        text = strip_controls(text)  # a carriage return becomes a line feed
    return "'" + text if formula or text.startswith(FORMULA_START) else text


def csv_chunks(table: OutputsTable) -> Iterator[str]:
    """``table`` as CSV: a header row, then a row a sample, each line ended by CRLF (RFC
    4180, as the explorer's download writes it)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    texts = [name not in NUMBERS for name in table.columns]
    writer.writerow([neutralised(name) for name in table.columns])
    for row in table.rows():
        writer.writerow(
            [neutralised(c) if text else c for c, text in zip(row.cells(), texts, strict=True)]
        )
        if buffer.tell() >= _CHUNK:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def jsonl_chunks(table: OutputsTable) -> Iterator[str]:
    """``table`` as JSON Lines: an object a sample (``OutputRow.fields``)."""
    lines: list[str] = []
    size = 0
    for row in table.rows():
        line = json_line(row.fields(table.criteria)) + "\n"
        lines.append(line)
        size += len(line)
        if size >= _CHUNK:
            yield "".join(lines)
            lines.clear()
            size = 0
    yield "".join(lines)


def chunks(table: OutputsTable, kind: str) -> Iterator[str]:
    """``table`` in format ``kind`` (one of ``FORMATS``), a chunk at a time."""
    return csv_chunks(table) if kind == "csv" else jsonl_chunks(table)


def write_file(path: Path, text: Iterable[str]) -> None:
    """Write ``text`` to ``path`` in UTF-8, whole or not at all, a chunk at a time
    (``store.journal.write_durably``)."""
    write_durably(path, (chunk.encode("utf-8") for chunk in text))
