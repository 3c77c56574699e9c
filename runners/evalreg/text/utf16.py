"""Text as UTF-16 code units, the way JavaScript strings (and regular expressions without
the ``u`` flag) see it: a character beyond U+FFFF is two units, its surrogate pair."""

from __future__ import annotations

_BMP = "\uffff"


def code_units(text: str) -> str:
    """``text`` with every character beyond U+FFFF split into its UTF-16 surrogate pair."""
    if max(text, default="") <= _BMP:
        return text
    return "".join(_pair(c) if c > _BMP else c for c in text)


def from_code_units(units: str) -> str:
    """Code units back as text: each surrogate pair becomes the character it encodes, and a
    surrogate on its own stays as it is."""
    return units.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _pair(char: str) -> str:
    offset = ord(char) - 0x10000
    return chr(0xD800 + (offset >> 10)) + chr(0xDC00 + (offset & 0x3FF))
