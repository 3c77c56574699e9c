"""The vision model of the attachments guide (``docs/guides/attachments.md``): it reads the
total printed on an attached receipt or invoice.

The guide's files carry their text where a reader of bytes finds it: a PNG in a ``tEXt``
chunk, a PDF in its content stream. The model decodes every file the request carries (a
data URL, or a ``data`` field, whatever the protocol) and answers the first ``TOTAL``
amount it reads, as ``{"total": ...}``; with no file, or no total, ``{"total": null}``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator
from typing import Any

from support.docs_models import ANSWERS
from support.llm_server import Request

VISION_MODEL = "qwen2.5-vl-7b-instruct"
TOTAL = re.compile(rb"TOTAL (\d+(?:\.\d+)?)")


def _files(value: Any) -> Iterator[bytes]:
    """The decoded bytes of every file in a request body."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key in ("data", "bytes") and isinstance(inner, str):
                yield _decoded(inner)
            else:
                yield from _files(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _files(inner)
    elif isinstance(value, str) and value.startswith("data:") and ";base64," in value:
        yield _decoded(value.partition(";base64,")[2])


def _decoded(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return b""


def read_total(request: Request) -> str:
    for data in _files(request.body or {}):
        found = TOTAL.search(data)
        if found:
            return json.dumps({"total": float(found[1])})
    return json.dumps({"total": None})


ANSWERS[VISION_MODEL] = read_total
