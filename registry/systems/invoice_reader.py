"""Offline invoice reader: the non-AI baseline for invoice fields.

It reads the attached file itself: a PDF's text from its content streams (the ``Tj``
strings, after inflating Flate streams), a PNG scan by cutting it into the page grid and
matching each character cell against the printing font's glyphs (``invoice_font.py``),
by majority vote over each dot's pixels and the nearest glyph. Then a few rules: the
first line is the vendor, ``INVOICE NO:`` the number, ``DATE:`` an ISO date, ``TOTAL``
the total and its currency. It is honest but naive: it knows one date format and one
label for the total, and speckle beyond what the vote absorbs garbles characters.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import re
import struct
import zlib
from pathlib import Path
from typing import Any


def _font() -> Any:
    path = Path(__file__).with_name("invoice_font.py")
    spec = importlib.util.spec_from_file_location("invoice_font", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FONT = _font()
BITS = {"".join(rows): char for char, rows in FONT.GLYPHS.items()}


def read(request: dict[str, Any]) -> str:
    """The invoice's fields as JSON, from the file attached to the last message."""
    content = request["messages"][-1]["content"]
    files = [p for p in content if isinstance(content, list) and p.get("type") == "file"]
    if not files:
        return json.dumps({"error": "no attachment"})
    data = base64.b64decode(files[0]["data"])
    text = pdf_text(data) if files[0]["media_type"] == "application/pdf" else png_text(data)
    return json.dumps(fields(text), sort_keys=True)


def fields(text: str) -> dict[str, Any]:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    out: dict[str, Any] = {"vendor": lines[0] if lines else None}
    number = re.search(r"INVOICE NO:\s*(\S+)", text)
    out["invoice_number"] = number.group(1) if number else None
    date = re.search(r"DATE:\s*(\d{4}-\d{2}-\d{2})", text)
    out["date"] = date.group(1) if date else None
    total = re.search(r"^TOTAL\s+([\d,]+\.\d{2})\s+([A-Z]{3})", text, re.MULTILINE)
    out["total"] = float(total.group(1).replace(",", "")) if total else None
    out["currency"] = total.group(2) if total else None
    return out


def pdf_text(data: bytes) -> str:
    lines = []
    for match in re.finditer(rb"<<(.*?)>>\s*stream\r?\n(.*?)\r?\nendstream", data, re.DOTALL):
        stream = match.group(2)
        if b"/FlateDecode" in match.group(1):
            stream = zlib.decompress(stream)
        for string in re.finditer(rb"\(((?:\\.|[^\\)])*)\)\s*Tj", stream):
            lines.append(re.sub(rb"\\(.)", rb"\1", string.group(1)).decode("latin-1"))
    return "\n".join(lines)


def png_text(data: bytes) -> str:
    width, height, rows = _png_grey(data)
    scale, cell_w, cell_h, margin = FONT.SCALE, FONT.CELL_W, FONT.CELL_H, FONT.MARGIN
    out = []
    for top in range(margin, height - margin - 5 * scale + 1, cell_h):
        chars = []
        for left in range(margin, width - margin - 3 * scale + 1, cell_w):
            bits = ""
            for dy in range(5):
                for dx in range(3):
                    ink = sum(
                        rows[y][x] < 128
                        for y in range(top + dy * scale, top + (dy + 1) * scale)
                        for x in range(left + dx * scale, left + (dx + 1) * scale)
                    )
                    bits += "1" if 2 * ink > scale * scale else "0"
            chars.append(BITS.get(bits) or _nearest(bits))
        out.append("".join(chars).rstrip())
    return "\n".join(out)


def _nearest(bits: str) -> str:
    return min(BITS.items(), key=lambda kv: sum(a != b for a, b in zip(kv[0], bits)))[1]


def _png_grey(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and rows of an 8-bit greyscale, non-interlaced PNG."""
    pos, idat = 8, b""
    width = height = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            if (depth, colour) != (8, 0):
                raise ValueError("only 8-bit greyscale scans are read")
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    rows: list[bytes] = []
    prev = bytes(width)
    for y in range(height):
        line = raw[y * (width + 1) : (y + 1) * (width + 1)]
        kind, row = line[0], bytearray(line[1:])
        for x in range(width):
            a = row[x - 1] if x else 0
            b, c = prev[x], prev[x - 1] if x else 0
            if kind == 1:
                row[x] = (row[x] + a) & 0xFF
            elif kind == 2:
                row[x] = (row[x] + b) & 0xFF
            elif kind == 3:
                row[x] = (row[x] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                row[x] = (row[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        prev = bytes(row)
        rows.append(prev)
    return width, height, rows
