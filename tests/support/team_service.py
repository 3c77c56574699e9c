"""A team's own service on loopback, the kind an ``http`` pin reaches: not a model API.

It answers a JSON request about a question with ``{"answer": {"text": ..., "sources": [...]},
"meta": {...}}`` (or plain text, or anything a test gives), checks a key in its own header,
records every request as received, and can be told to fail the next requests with a status.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]
    """Lower-case names."""
    raw: bytes

    @property
    def body(self) -> Any:
        return json.loads(self.raw)


@dataclass(frozen=True)
class Answer:
    status: int
    content: bytes
    content_type: str = "application/json"


def answer_json(data: Any, status: int = 200) -> Answer:
    return Answer(status, json.dumps(data).encode())


class TeamService:
    """``answer(received) -> Answer`` decides each reply once the key checks out."""

    def __init__(
        self,
        answer: Callable[[Received], Answer],
        *,
        key_header: str = "x-service-key",
        key: str | None = None,
    ) -> None:
        self.answer = answer
        self.key_header = key_header
        self.key = key
        self.received: list[Received] = []
        self._failures: deque[Answer] = deque()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def fail_next(self, status: int, body: Any, times: int = 1) -> None:
        with self._lock:
            self._failures.extend([answer_json(body, status)] * times)

    def _reply(self, received: Received) -> Answer:
        with self._lock:
            self.received.append(received)
            if self.key is not None and received.headers.get(self.key_header) != self.key:
                return answer_json({"detail": "unknown service key"}, 401)
            if self._failures:
                return self._failures.popleft()
        return self.answer(received)

    def __enter__(self) -> TeamService:
        service = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                reply = service._reply(Received(self.command, self.path, headers, raw))
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", reply.content_type)
                    self.send_header("content-length", str(len(reply.content)))
                    self.end_headers()
                    self.wfile.write(reply.content)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_POST = do_PUT = do_PATCH = _handle

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        ).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._httpd is not None
        self._httpd.shutdown()
        self._httpd.server_close()
