"""A real uvicorn on a loopback port, serving an app: in the test's own event loop (the
API tests, async) or in a thread with a loop of its own (the browser tests, sync).

The socket is bound before the server starts (port 0: the system picks a free one), so
the address is known and taken before any request is made.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import uvicorn
from starlette.types import ASGIApp


def loopback_socket() -> socket.socket:
    """A TCP socket bound to 127.0.0.1 on a free port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def base_url(sock: socket.socket) -> str:
    """``http://127.0.0.1:PORT`` of a bound socket."""
    host, port = sock.getsockname()[:2]
    return f"http://{host}:{port}"


def _server(app: ASGIApp) -> uvicorn.Server:
    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=2)
    return uvicorn.Server(config)


@contextlib.asynccontextmanager
async def serving(app: ASGIApp, sock: socket.socket | None = None) -> AsyncIterator[str]:
    """Serve ``app`` on loopback in this event loop (on ``sock``, bound already, when the
    app must know its address before it serves); yields its base URL."""
    sock = sock if sock is not None else loopback_socket()
    server = _server(app)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()  # raises what stopped it
            await asyncio.sleep(0.01)
        yield base_url(sock)
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=10)
        sock.close()


class ServerThread:
    """Serves the app ``build()`` makes (in the thread's own loop) until ``stop()``.

    ``build`` may open pools and the like in that loop; ``close`` (if given) runs there
    after the server stopped. ``call(coroutine_function)`` runs a coroutine in that loop
    from the test's thread and returns its result.
    """

    def __init__(
        self,
        build: Callable[[], Awaitable[ASGIApp]],
        close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._build = build
        self._close = close
        self._sock = loopback_socket()
        self.url = base_url(self._sock)
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: uvicorn.Server | None = None
        self._thread = threading.Thread(target=self._run, name="web-server", daemon=True)

    def start(self, timeout: float = 30.0) -> ServerThread:
        """Start serving; returns once the server accepts connections."""
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("the web server did not start")
        if self._failure is not None:
            raise RuntimeError("the web server failed to start") from self._failure
        return self

    def call(self, make: Callable[[], Awaitable[Any]], timeout: float = 30.0) -> Any:
        """Run ``make()`` in the server's loop; its result."""
        if self._loop is None:
            raise RuntimeError("the server is not running")
        future = asyncio.run_coroutine_threadsafe(_awaited(make), self._loop)
        return future.result(timeout)

    def stop(self) -> None:
        """Stop serving and wait for the thread."""
        if self._server is not None:
            self._server.should_exit = True
        self._thread.join(timeout=20)
        self._sock.close()

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        try:
            app = await self._build()
            self._server = _server(app)
            task = asyncio.create_task(self._server.serve(sockets=[self._sock]))
            while not self._server.started and not task.done():
                await asyncio.sleep(0.01)
            if task.done():
                task.result()
        except BaseException as exc:
            self._failure = exc
            self._ready.set()
            raise
        self._ready.set()
        try:
            await task
        finally:
            if self._close is not None:
                await self._close()


async def _awaited(make: Callable[[], Awaitable[Any]]) -> Any:
    return await make()
