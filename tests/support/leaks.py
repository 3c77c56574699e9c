"""Where a secret would show if it leaked: each encoding a key is found in, searched for in
what a run left on disk and printed."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from urllib.parse import quote


def forms(secret: str) -> list[bytes]:
    """``secret`` raw, JSON-escaped, percent-encoded, and its base64 behind 0, 1 and 2 other
    bytes (as inside HTTP Basic auth's ``user:key``): for base64, a run of digits made of
    the secret's bits alone, so it is found inside any longer base64 text."""
    raw = secret.encode()
    found = {raw, json.dumps(secret)[1:-1].encode(), quote(raw, safe="").encode()}
    for before in (b"", b"u", b"us"):
        # The first two digits and the last four may carry bits of what surrounds it.
        found.add(base64.b64encode(before + raw)[2:-4])
    return sorted(found)


def leaks(
    haystacks: Iterable[tuple[str, bytes]], secrets: Iterable[str]
) -> list[tuple[str, str, bytes]]:
    """(where, secret, form) for each form of each secret found in a (where, data) pair."""
    places = list(haystacks)
    return [
        (where, secret, form)
        for secret in secrets
        for form in forms(secret)
        for where, data in places
        if form in data
    ]
