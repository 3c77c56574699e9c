"""Store keys held as one column of raw digests: 32 bytes a key, not a string each.

A cell's plan holds the key of every request it makes, a million for a million-item eval
set: as strings they take some 120 bytes each (the object, its 64 characters, the list's
pointer); as the sha256 digests they spell, 32. A key is spelled again, as ``request_key``
spells it, when it is read.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Iterator, Sequence
from typing import overload

KEY_BYTES = 32
"""A key's digest: 64 lowercase hex digits."""
_HEX = re.compile("[0-9a-f]*")
_SPELLED = 1 << 16
"""Keys spelled at once when a column is searched: some 7 MB of strings."""


class KeyColumn(Sequence[str]):
    """Store keys in order, each held as the 32 bytes its 64 lowercase hex digits spell.

    A ``Sequence[str]`` that grows at its end (``extend``): a key reads back as the string
    it was given. Only keys spelled as ``request_key`` spells them (64 lowercase hex digits)
    can be held; any other is a ``ValueError``.
    """

    __slots__ = ("_raw",)

    def __init__(self, keys: Iterable[str] = ()) -> None:
        self._raw = bytearray()
        self.extend(keys)

    def extend(self, keys: Iterable[str]) -> None:
        """Add ``keys`` at the end."""
        keys = list(keys)
        joined = "".join(keys)
        # The length of them all: a 63- and a 65-digit key are not two keys.
        if (
            len(joined) != 2 * KEY_BYTES * len(keys)
            or min(map(len, keys), default=2 * KEY_BYTES) != 2 * KEY_BYTES
            or _HEX.fullmatch(joined) is None
        ):
            raise ValueError("a store key is 64 lowercase hex digits")
        self._raw += bytes.fromhex(joined)

    def extend_digests(self, digests: bytes) -> None:
        """Add the keys whose digests ``digests`` holds, 32 bytes each, in order."""
        if len(digests) % KEY_BYTES:
            raise ValueError("a store key's digest is 32 bytes")
        self._raw += digests

    def extend_column(self, other: KeyColumn) -> None:
        """Add the keys of ``other`` at the end (its digests copied once, not spelled)."""
        self._raw += other._raw

    def among(self, wanted: Container[str]) -> list[int]:
        """The positions of the keys ``wanted`` holds, ascending (spelled a block of keys
        at a time)."""
        found: list[int] = []
        for start in range(0, len(self), _SPELLED):
            spelled = self[start : start + _SPELLED]
            found.extend(start + at for at, key in enumerate(spelled) if key in wanted)
        return found

    def digests(self, start: int = 0, stop: int | None = None) -> bytes:
        """The digests of keys ``start`` to ``stop`` (default: the end), 32 bytes each."""
        stop = len(self) if stop is None else stop
        return bytes(self._raw[start * KEY_BYTES : stop * KEY_BYTES])

    def part(self, start: int, stop: int) -> KeyColumn:
        """Keys ``start`` to ``stop``, as a column of their own (their digests copied)."""
        part = KeyColumn()
        part.extend_digests(self.digests(start, stop))
        return part

    def __len__(self) -> int:
        return len(self._raw) // KEY_BYTES

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            raw = self._raw
            picked = (
                raw[start * KEY_BYTES : max(start, stop) * KEY_BYTES]
                if step == 1
                else b"".join(
                    raw[at * KEY_BYTES : (at + 1) * KEY_BYTES] for at in range(start, stop, step)
                )
            )
            # Spelled in one hex string, then cut in keys: not a conversion a key.
            spelled = picked.hex()
            width = 2 * KEY_BYTES
            return [spelled[at : at + width] for at in range(0, len(spelled), width)]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._raw[index * KEY_BYTES : (index + 1) * KEY_BYTES].hex()

    def __iter__(self) -> Iterator[str]:
        # Read at each step, not through a view held across them: the column may grow
        # between two (a run keys later requests while it grades earlier ones).
        raw = self._raw
        at = 0
        while at < len(raw):
            yield raw[at : at + KEY_BYTES].hex()
            at += KEY_BYTES

    def __eq__(self, other: object) -> bool:
        if isinstance(other, KeyColumn):
            return self._raw == other._raw
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, as a list is

    def __repr__(self) -> str:
        return f"KeyColumn({len(self)} keys)"
