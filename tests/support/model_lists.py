"""A loopback stand-in for the providers' model lists, as their APIs page them.

- ``GET /v1/models`` in OpenAI's shape (``Authorization: Bearer KEY``), or in Anthropic's
  when the request carries ``anthropic-version`` (the key in ``x-api-key``, or as a
  bearer): ``limit`` (at most ``page`` a page here), ``after_id``, and ``data``,
  ``has_more``, ``first_id``, ``last_id``;
- ``GET /openai/models?api-version=…`` in Azure OpenAI's (``api-key``), one page;
- ``GET /v1beta/models`` in the Gemini API's (``x-goog-api-key``): ``pageSize``,
  ``pageToken``, and ``models`` with each ``name`` as ``models/ID``, ``nextPageToken``.

A wrong or missing key is a 401 in the provider's error shape. ``fail`` makes every list
answer 503 (a provider that does not answer); ``asked`` counts the requests each list got.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


@dataclass
class ModelLists:
    openai: list[str] = field(default_factory=list)
    anthropic: list[str] = field(default_factory=list)
    gemini: list[str] = field(default_factory=list)
    azure: list[str] = field(default_factory=list)
    key: str = "sk-lists-test-5f0c1d"
    page: int = 2
    """Most ids on one page, whatever the request asks (so every list is paged)."""
    fail: bool = False
    asked: Counter[str] = field(default_factory=Counter)
    url: str = ""


def _page(ids: list[str], after: str | None, size: int) -> tuple[list[str], bool]:
    start = ids.index(after) + 1 if after in ids else 0
    chunk = ids[start : start + size]
    return chunk, start + size < len(ids)


@contextmanager
def model_lists(lists: ModelLists) -> Iterator[ModelLists]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _send(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
            anthropic = "anthropic-version" in self.headers
            if parts.path == "/v1/models" and anthropic:
                # The API takes the key in x-api-key, or (as newer SDKs send it) as a bearer.
                bearer = self.headers.get("authorization") == f"Bearer {lists.key}"
                kind, ok = "anthropic", self.headers.get("x-api-key") == lists.key or bearer
            elif parts.path == "/v1/models":
                kind, ok = "openai", self.headers.get("authorization") == f"Bearer {lists.key}"
            elif parts.path == "/v1beta/models":
                kind, ok = "gemini", self.headers.get("x-goog-api-key") == lists.key
            elif parts.path == "/openai/models" and query.get("api-version"):
                kind, ok = "azure", self.headers.get("api-key") == lists.key
            else:
                self._send(404, {"error": {"message": "not found"}})
                return
            lists.asked[kind] += 1
            if lists.fail:
                self._send(503, {"error": {"message": "the service is unavailable"}})
                return
            if not ok:
                self._send(
                    401, {"error": {"message": "invalid key", "type": "authentication_error"}}
                )
                return
            if kind == "azure":
                data = [{"id": i, "status": "succeeded", "object": "model"} for i in lists.azure]
                self._send(200, {"data": data, "object": "list"})
            elif kind == "openai":
                ids = lists.openai
                chunk, more = _page(ids, query.get("after"), lists.page)
                body: dict[str, object] = {
                    "object": "list",
                    "data": [
                        {"id": i, "object": "model", "created": 1700000000, "owned_by": "system"}
                        for i in chunk
                    ],
                }
                if more:
                    body.update(has_more=True, last_id=chunk[-1])
                self._send(200, body)
            elif kind == "anthropic":
                size = min(int(query.get("limit", 20)), lists.page)
                chunk, more = _page(lists.anthropic, query.get("after_id"), size)
                self._send(
                    200,
                    {
                        "data": [
                            {
                                "id": i,
                                "type": "model",
                                "display_name": i,
                                "created_at": "2025-01-01T00:00:00Z",
                            }
                            for i in chunk
                        ],
                        "has_more": more,
                        "first_id": chunk[0] if chunk else None,
                        "last_id": chunk[-1] if chunk else None,
                    },
                )
            else:
                size = min(int(query.get("pageSize", 50)), lists.page)
                token = query.get("pageToken")
                chunk, more = _page(lists.gemini, token, size)
                body = {"models": [{"name": f"models/{i}", "version": "001"} for i in chunk]}
                if more:
                    body["nextPageToken"] = chunk[-1]
                self._send(200, body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    lists.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield lists
    finally:
        server.shutdown()
        server.server_close()
