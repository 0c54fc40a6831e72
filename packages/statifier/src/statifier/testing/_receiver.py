"""``HttpReceiver``: a small HTTP/1.1 server on loopback that records what it is sent, the
other end of a chart's BasicHTTP sends under test (``<send type="basichttp">`` from a live
session or a durable execution's job).

Each request is read whole (its ``Content-Length`` body, at most 1 MiB), recorded, and
answered with the next status of ``statuses`` (the last one repeats; 204 when none are
given), with a ``Location`` header for a 3xx. ``hang=True`` reads requests and never
answers (to test timeouts). ``wait_for(n)`` returns once ``n`` requests have arrived. Allow
its address in the test's ``OutboundPolicy``: ``hosts=("127.0.0.1",),
networks=("127.0.0.0/8",), ports=None``.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from types import TracebackType
from typing import Final, Self

MAX_BODY: Final = 1 << 20
"""The largest request body an ``HttpReceiver`` reads."""


@dataclass(frozen=True, slots=True)
class ReceivedRequest:
    """One request as it arrived: method, target (path and query), headers (names in lower
    case) and body."""

    method: str
    target: str
    headers: dict[str, str]
    body: bytes


@dataclass
class HttpReceiver:
    """See the module docstring: an async context manager; ``url(path)`` is an address on it
    (``http://127.0.0.1:<port><path>``) and ``requests`` what it received, in order."""

    statuses: list[int] = field(default_factory=lambda: [204])
    hang: bool = False
    requests: list[ReceivedRequest] = field(default_factory=list)
    port: int = 0
    _server: asyncio.Server | None = None
    _arrived: asyncio.Condition = field(default_factory=asyncio.Condition)
    _open: set[asyncio.StreamWriter] = field(default_factory=set)

    def url(self, path: str = "/hook", host: str = "127.0.0.1") -> str:
        """``http://<host>:<port><path>``."""
        return f"http://{host}:{self.port}{path}"

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._server is None:
            return
        self._server.close()
        for writer in list(self._open):
            writer.close()
        await self._server.wait_closed()

    async def wait_for(self, count: int, timeout: float = 10.0) -> list[ReceivedRequest]:
        """The requests, once at least ``count`` have arrived (``TimeoutError`` otherwise)."""
        async with asyncio.timeout(timeout), self._arrived:
            await self._arrived.wait_for(lambda: len(self.requests) >= count)
        return list(self.requests)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._open.add(writer)
        try:
            while True:
                received = await _read(reader)
                if received is None:
                    return
                async with self._arrived:
                    self.requests.append(received)
                    self._arrived.notify_all()
                if self.hang:
                    await asyncio.sleep(3600)
                index = min(len(self.requests), len(self.statuses)) - 1
                status = self.statuses[index]
                extra = "Location: http://127.0.0.1:9/elsewhere\r\n" if 300 <= status < 400 else ""
                writer.write(
                    f"HTTP/1.1 {status} X\r\n{extra}Content-Length: 2\r\n\r\nok".encode("ascii")
                )
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            return
        finally:
            self._open.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()


async def _read(reader: asyncio.StreamReader) -> ReceivedRequest | None:
    line = await reader.readline()
    if not line:
        return None
    method, target, _ = line.decode("latin-1").split(" ", 2)
    headers: dict[str, str] = {}
    while (header := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = header.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    if not 0 <= length <= MAX_BODY:
        return None
    body = await reader.readexactly(length)
    return ReceivedRequest(method, target, headers, body)
