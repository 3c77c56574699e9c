"""Deterministic generator for the invoice-fields eval set (evalsets/invoices.jsonl) and the
invoices it attaches (evalsets/invoices/inv-NNN.pdf and .png).

Run ``python evalsets/generators/invoices.py`` from any directory. Every run writes the same
bytes: all randomness comes from one ``random.Random(SEED)``, and the PDFs and PNGs are
written by hand (zlib and struct, no timestamps, no ids), so a file's bytes depend only on
its invoice.

Each invoice is from one of a few fictional suppliers to Larkspur and has a vendor, an
invoice number, a date, two to four lines, a subtotal, tax and a total in one currency.
A reader returns ``{"vendor", "invoice_number", "date", "total", "currency"}`` with the
date as YYYY-MM-DD and the total as a number. Half the invoices are text PDFs, half are
scanned PNGs (printed in the 3x5 font of ``registry/systems/invoice_font.py``). Slices:

* ``pdf`` / ``png``: the file type.
* ``scan_noise``: a PNG scan with heavy speckle (about one dot in five flipped).
* ``day_first``: the date is printed DD/MM/YYYY, as European suppliers do.
* ``amount_due``: the total's line is labelled AMOUNT DUE, not TOTAL.
"""

from __future__ import annotations

import importlib.util
import json
import random
import struct
import zlib
from pathlib import Path

SEED = 20261201
COUNT = 24
ROOT = Path(__file__).resolve().parents[2]
OUT_PATH = ROOT / "evalsets" / "invoices.jsonl"
FILES = "evalsets/invoices"

VENDORS = (
    "NORTHWIND TRADERS",
    "BLUE HERON PRINTING",
    "KESTREL LOGISTICS",
    "ALDER & BIRCH LTD",
    "OSPREY OFFICE SUPPLY",
    "MERIDIAN TOOLS GMBH",
)
PRODUCTS = (
    ("LABEL ROLLS", 14.5),
    ("BARCODE SCANNER", 189.0),
    ("TAG READER", 242.0),
    ("USB HUB", 36.75),
    ("THERMAL PRINTER", 315.0),
    ("PACKING TAPE", 4.2),
    ("SHIPPING BOXES", 1.85),
    ("SERVICE HOURS", 95.0),
)
CURRENCIES = (("EUR", 0.2), ("GBP", 0.2), ("USD", 0.0))
"""Each currency with its tax rate."""


def _font() -> object:
    path = ROOT / "registry" / "systems" / "invoice_font.py"
    spec = importlib.util.spec_from_file_location("invoice_font", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FONT = _font()


def _money(value: float) -> str:
    return f"{value:,.2f}"


def invoice(rng: random.Random, number: int) -> dict[str, object]:
    """One invoice: its fields, its printed lines and its slices."""
    vendor = rng.choice(VENDORS)
    currency, tax_rate = rng.choice(CURRENCIES)
    year, month, day = 2026, rng.randint(1, 11), rng.randint(1, 28)
    fmt = "png" if number % 2 == 0 else "pdf"
    day_first = number % 4 == 1
    amount_due = number % 6 in (0, 3) and not day_first
    noisy = fmt == "png" and number % 5 in (0, 4)
    lines = []
    subtotal = 0.0
    for name, price in rng.sample(PRODUCTS, rng.randint(2, 4)):
        quantity = rng.randint(1, 12)
        amount = round(quantity * price, 2)
        subtotal = round(subtotal + amount, 2)
        lines.append(f"{name} X{quantity} {_money(amount)}")
    tax = round(subtotal * tax_rate, 2)
    total = round(subtotal + tax, 2)
    invoice_number = f"INV-{year}-{rng.randint(100, 9999):04d}"
    printed_date = f"{day:02d}/{month:02d}/{year}" if day_first else f"{year}-{month:02d}-{day:02d}"
    text = [
        vendor,
        f"INVOICE NO: {invoice_number}",
        f"DATE: {printed_date}",
        "BILL TO: LARKSPUR INVENTORY",
        "",
        *lines,
        "",
        f"SUBTOTAL {_money(subtotal)} {currency}",
        f"TAX {_money(tax)} {currency}",
        f"{'AMOUNT DUE' if amount_due else 'TOTAL'} {_money(total)} {currency}",
    ]
    tags = [fmt] + [
        tag
        for tag, on in (("scan_noise", noisy), ("day_first", day_first), ("amount_due", amount_due))
        if on
    ]
    return {
        "id": f"inv-{number:03d}",
        "format": fmt,
        "noisy": noisy,
        "text": text,
        "tags": tags,
        "expected": {
            "vendor": vendor,
            "invoice_number": invoice_number,
            "date": f"{year}-{month:02d}-{day:02d}",
            "total": total,
            "currency": currency,
        },
    }


# ------------------------------------------------------------------------------ PDF
def _pdf_string(text: str) -> str:
    return "(" + text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"


def pdf(lines: list[str]) -> bytes:
    """A one-page PDF 1.4 showing ``lines`` in Helvetica: a catalog, the page tree, one
    page, the font and a Flate-compressed content stream, with an exact xref table."""
    ops = ["BT", "/F1 11 Tf", "14 TL", "56 780 Td"]
    for line in lines:
        ops.append(f"{_pdf_string(line)} Tj T*")
    ops.append("ET")
    content = zlib.compress("\n".join(ops).encode("latin-1"), 9)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] "
        b"/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(content)
        + content
        + b"\nendstream",
    ]
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


# ------------------------------------------------------------------------------ PNG
def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(lines: list[str], rng: random.Random, noise: float) -> bytes:
    """An 8-bit greyscale PNG of ``lines`` printed in the bitmap font, black on white,
    with each pixel flipped with probability ``noise`` (a speckled scan)."""
    scale, cell_w, cell_h, margin = FONT.SCALE, FONT.CELL_W, FONT.CELL_H, FONT.MARGIN  # type: ignore[attr-defined]
    glyphs = FONT.GLYPHS  # type: ignore[attr-defined]
    width = 2 * margin + cell_w * max(len(line) for line in lines)
    height = 2 * margin + cell_h * len(lines)
    pixels = [bytearray(b"\xff" * width) for _ in range(height)]
    for row, line in enumerate(lines):
        for col, char in enumerate(line):
            for dy, dots in enumerate(glyphs[char]):
                for dx, dot in enumerate(dots):
                    if dot == "1":
                        y0 = margin + row * cell_h + dy * scale
                        x0 = margin + col * cell_w + dx * scale
                        for y in range(y0, y0 + scale):
                            pixels[y][x0 : x0 + scale] = b"\x00" * scale
    if noise:
        for y in range(height):
            for x in range(width):
                if rng.random() < noise:
                    pixels[y][x] ^= 0xFF
    raw = b"".join(b"\x00" + bytes(r) for r in pixels)
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(raw, 9))
        + _chunk(b"IEND", b"")
    )


# ------------------------------------------------------------------------------ main
def build(seed: int = SEED) -> tuple[list[dict[str, object]], dict[str, bytes]]:
    """The items in file order, and each attached file's bytes by repository path."""
    rng = random.Random(seed)
    rows: list[dict[str, object]] = []
    files: dict[str, bytes] = {}
    for number in range(1, COUNT + 1):
        inv = invoice(rng, number)
        path = f"{FILES}/{inv['id']}.{inv['format']}"
        lines = list(inv["text"])  # type: ignore[call-overload]
        if inv["format"] == "pdf":
            files[path] = pdf(lines)
        else:
            files[path] = png(lines, rng, 0.2 if inv["noisy"] else 0.0)
        rows.append(
            {
                "id": inv["id"],
                "input": {"source": "scanned paper" if inv["format"] == "png" else "e-mail"},
                "attachments": [{"path": path}],
                "expected": inv["expected"],
                "tags": inv["tags"],
            }
        )
    return rows, files


def main() -> None:
    """Generate and write the eval set and its invoices."""
    rows, files = build()
    for rel, data in files.items():
        (ROOT / rel).parent.mkdir(parents=True, exist_ok=True)
        (ROOT / rel).write_bytes(data)
    text = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
    OUT_PATH.write_text(text, encoding="utf-8", newline="\n")
    print(f"wrote {len(rows)} items to {OUT_PATH.relative_to(ROOT)} and {len(files)} invoices")


if __name__ == "__main__":
    main()
