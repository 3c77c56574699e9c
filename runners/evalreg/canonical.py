"""Canonical JSON: the one serialisation used for hashing, request bodies and result files."""

from __future__ import annotations

import hashlib
import json
from typing import Any


_ENCODE = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode


def canonical_bytes(obj: Any) -> bytes:
    """Sorted keys, no whitespace, UTF-8, no NaN: equal values give equal bytes."""
    return _ENCODE(obj).encode("utf-8")


def digest(obj: Any) -> str:
    """sha256 hex of ``obj``'s canonical JSON."""
    return hashlib.sha256(canonical_bytes(obj)).hexdigest()
