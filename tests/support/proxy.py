"""A real loopback HTTP CONNECT proxy, for tests of corporate networks.

``ConnectProxy`` listens on ``127.0.0.1`` on its own event loop in a background thread and
answers ``CONNECT host:port HTTP/1.1`` by opening a TCP connection to the target and piping
bytes both ways (a tunnel: TLS to the target passes through unread). It counts the tunnels it
opened (``tunnels``, with their targets), records every ``Proxy-Authorization`` header it was
sent (``credentials``), and, given ``credentials=("user", "password")``, refuses a CONNECT
without them with ``407 Proxy Authentication Required``. Anything but CONNECT gets a 405.

    with ConnectProxy() as proxy:
        env["HTTPS_PROXY"] = proxy.url
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import threading
from collections.abc import Callable
from types import TracebackType

__all__ = ["ConnectProxy"]


class ConnectProxy:
    def __init__(self, *, credentials: tuple[str, str] | None = None) -> None:
        self.credentials = credentials
        self.port = 0
        #: ``host:port`` of every tunnel opened, in order.
        self.tunnels: list[str] = []
        #: Every ``Proxy-Authorization`` value received (None where there was none).
        self.authorizations: list[str | None] = []
        #: CONNECT requests refused for missing or wrong credentials.
        self.refused = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``, for ``HTTPS_PROXY``."""
        return f"http://127.0.0.1:{self.port}"

    def url_with_credentials(self, user: str, password: str) -> str:
        return f"http://{user}:{password}@127.0.0.1:{self.port}"

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> ConnectProxy:
        ready = threading.Event()
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._run(ready.set)), name="ConnectProxy", daemon=True
        )
        self._thread.start()
        ready.wait()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join()

    async def _run(self, started: Callable[[], None]) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        tasks: set[asyncio.Task[None]] = set()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            tasks.add(task)
            try:
                await self._handle(reader, writer)
            except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                pass
            finally:
                tasks.discard(task)
                writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        started()
        try:
            await self._stop.wait()
        finally:
            server.close()
            for task in list(tasks):
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await server.wait_closed()

    # -- one client connection -------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        lines = head.split("\r\n")
        method, _, rest = lines[0].partition(" ")
        target = rest.partition(" ")[0]
        headers = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if colon:
                headers[name.strip().lower()] = value.strip()
        if method != "CONNECT":
            writer.write(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()
            return
        authorization = headers.get("proxy-authorization")
        self.authorizations.append(authorization)
        if self.credentials is not None:
            user, password = self.credentials
            expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
            if authorization != expected:
                self.refused += 1
                writer.write(
                    b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                    b'proxy-authenticate: Basic realm="test"\r\ncontent-length: 0\r\n\r\n'
                )
                await writer.drain()
                return
        host, _, port = target.rpartition(":")
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()
            return
        self.tunnels.append(target)
        writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        await writer.drain()
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            up_writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        with contextlib.suppress(OSError):
            writer.write_eof()
