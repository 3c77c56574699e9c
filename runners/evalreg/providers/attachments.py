"""Attachments in requests: the file types items may attach, what each provider accepts,
and the content part each API carries a file in.

A rendered message whose content is a list holds neutral parts (``prompting`` makes
them): ``{"type": "text", "text": ...}`` and ``{"type": "file", "path": ...,
"media_type": ..., "data": <base64>}``. Each provider turns them into its own form here,
so the exact request body, and with it the store key, holds the file's bytes: a changed
file is a new request.

``python`` pins receive the neutral parts themselves in ``messages`` (``data`` is the
file's bytes in base64, ``path`` its repository path), with no size limit.
"""

from __future__ import annotations

import base64
import re
from typing import Any

from evalreg.registry.schema import AttachedFile

PNG, JPEG, PDF = "image/png", "image/jpeg", "application/pdf"
MAGIC = ((PNG, b"\x89PNG\r\n\x1a\n"), (JPEG, b"\xff\xd8\xff"), (PDF, b"%PDF-"))
"""Each accepted type's first bytes: a file is typed by these, never by its name."""
EXTENSIONS = {".png": PNG, ".jpg": JPEG, ".jpeg": JPEG, ".pdf": PDF}
NAMES = {PNG: "PNG", JPEG: "JPEG", PDF: "PDF"}

MB = 1024 * 1024
LIMITS: dict[str, dict[str, int]] = {
    "openai": {PNG: 20 * MB, JPEG: 20 * MB, PDF: 32 * MB},
    "azure_openai": {PNG: 20 * MB, JPEG: 20 * MB, PDF: 32 * MB},
    "openai_responses": {PNG: 20 * MB, JPEG: 20 * MB, PDF: 32 * MB},
    "anthropic": {PNG: 5 * MB, JPEG: 5 * MB, PDF: 32 * MB},
    "gemini": {PNG: 20 * MB, JPEG: 20 * MB, PDF: 20 * MB},
    "bedrock": {PNG: 3932160, JPEG: 3932160, PDF: 4718592},
}
"""The largest file of each type a provider accepts in one request, in bytes; a type a
provider lacks it cannot take. ``python`` takes every type at any size.

From each provider's documentation (December 2026):

- OpenAI chat completions, Azure OpenAI and the Responses API: images up to 20 MB each
  (``image_url`` / ``input_image``), PDFs up to 32 MB (``file`` / ``input_file``; the
  per-request limit on file content).
- Anthropic Messages: images up to 5 MB each through the API; PDFs within the 32 MB
  request limit (``document`` blocks, base64 source).
- Gemini ``generateContent``: inline data within the 20 MB request limit (larger files go
  through the File API, which evalreg does not use).
- Bedrock Converse (the ``Message`` reference): images at most 3.75 MB each, documents at
  most 4.5 MB each.
"""
COUNTS: dict[str, dict[str, int]] = {
    "anthropic": {"images": 100},
    "bedrock": {"images": 20, "documents": 5},
}
"""The most images and documents one request may carry, where a provider documents a
limit (Anthropic: 100 images a request; Bedrock Converse: 20 images and 5 documents a
message)."""
MAX_BYTES = 32 * MB
"""The largest attachment read at all: the largest any provider accepts."""


FILE_TOKENS = 1600
"""What one attached file is estimated to cost in input tokens before it is sent: about
the most an image costs (Anthropic's ``width * height / 750`` for its largest size,
OpenAI's high detail at 1024 px), and a page or two of a PDF."""
_FILE_DATA = re.compile(rb'(?:"data":\s*"|"bytes":\s*"|;base64,)([A-Za-z0-9+/]+={0,2})(?=")')
"""A file's base64 where the content parts above put it: a ``data`` or ``bytes`` field, or
a data URL. Text, even a long run of letters, is never taken for a file: in a request
body, text inside a message is a JSON string, so its quotes are escaped."""


def estimated_input_tokens(content: bytes) -> int:
    """Input tokens a request body of ``content`` is estimated to hold: three bytes of
    text a token, and ``FILE_TOKENS`` for each file's base64 (which a model reads as an
    image or a document, not as its characters)."""
    files = chars = 0
    for match in _FILE_DATA.finditer(content):
        files += 1
        chars += match.end(1) - match.start(1)
    return (len(content) - chars) // 3 + files * FILE_TOKENS


def sniff(data: bytes) -> str | None:
    """The media type ``data`` begins like (PNG, JPEG or PDF), or None."""
    for media_type, magic in MAGIC:
        if data.startswith(magic):
            return media_type
    return None


def limit_problem(provider: str, media_type: str, size: int) -> str | None:
    """Why ``provider`` cannot take a ``media_type`` file of ``size`` bytes, or None."""
    if provider == "python":
        return None
    limits = LIMITS.get(provider)
    if limits is None or media_type not in limits:
        return f"{provider} pins cannot take {NAMES[media_type]} attachments"
    if size > limits[media_type]:
        return (
            f"{size:,} bytes is more than the {limits[media_type]:,} a {NAMES[media_type]} "
            f"attachment may have for {provider} pins"
        )
    return None


def count_problem(provider: str, media_types: list[str]) -> str | None:
    """Why ``provider`` cannot take one request attaching files of ``media_types``, or
    None."""
    limits = COUNTS.get(provider, {})
    counted = {
        "images": sum(t != PDF for t in media_types),
        "documents": sum(t == PDF for t in media_types),
    }
    for kind, most in limits.items():
        if counted[kind] > most:
            return (
                f"{counted[kind]} {kind} are more than the {most} one {provider} request may carry"
            )
    return None


def neutral_part(file: AttachedFile) -> dict[str, str]:
    """The neutral content part carrying ``file``."""
    return {
        "type": "file",
        "path": file.path,
        "media_type": file.media_type,
        "data": base64.b64encode(file.data).decode("ascii"),
    }


def _data_url(part: dict[str, Any]) -> str:
    return f"data:{part['media_type']};base64,{part['data']}"


def _filename(part: dict[str, Any]) -> str:
    return str(part["path"]).rpartition("/")[2]


def openai_chat(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat-completions parts: ``text``, ``image_url`` with a data URL, ``file`` for PDFs."""
    out: list[dict[str, Any]] = []
    for part in content:
        if part["type"] == "text":
            out.append({"type": "text", "text": part["text"]})
        elif part["media_type"] == PDF:
            out.append(
                {
                    "type": "file",
                    "file": {"filename": _filename(part), "file_data": _data_url(part)},
                }
            )
        else:
            out.append({"type": "image_url", "image_url": {"url": _data_url(part)}})
    return out


def openai_responses(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Responses API parts: ``input_text``, ``input_image``, ``input_file``."""
    out: list[dict[str, Any]] = []
    for part in content:
        if part["type"] == "text":
            out.append({"type": "input_text", "text": part["text"]})
        elif part["media_type"] == PDF:
            out.append(
                {"type": "input_file", "filename": _filename(part), "file_data": _data_url(part)}
            )
        else:
            out.append({"type": "input_image", "image_url": _data_url(part)})
    return out


def anthropic(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages API blocks: ``text``, ``image`` and ``document`` with a base64 source."""
    out: list[dict[str, Any]] = []
    for part in content:
        if part["type"] == "text":
            out.append({"type": "text", "text": part["text"]})
        else:
            source = {"type": "base64", "media_type": part["media_type"], "data": part["data"]}
            kind = "document" if part["media_type"] == PDF else "image"
            out.append({"type": kind, "source": source})
    return out


def gemini(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``generateContent`` parts: ``text`` and ``inline_data``."""
    return [
        {"text": part["text"]}
        if part["type"] == "text"
        else {"inline_data": {"mime_type": part["media_type"], "data": part["data"]}}
        for part in content
    ]


_DOCUMENT_NAME = re.compile(r"[^A-Za-z0-9\-()\[\]]+")


def bedrock(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Converse blocks: ``text``, ``image`` and ``document`` with the bytes in base64.

    A document's ``name`` may hold letters, digits, hyphens, parentheses and brackets
    only: the file name's other characters become hyphens.
    """
    out: list[dict[str, Any]] = []
    for part in content:
        if part["type"] == "text":
            out.append({"text": part["text"]})
        elif part["media_type"] == PDF:
            name = _DOCUMENT_NAME.sub("-", _filename(part).rpartition(".")[0]) or "document"
            out.append(
                {"document": {"format": "pdf", "name": name, "source": {"bytes": part["data"]}}}
            )
        else:
            fmt = "png" if part["media_type"] == PNG else "jpeg"
            out.append({"image": {"format": fmt, "source": {"bytes": part["data"]}}})
    return out
