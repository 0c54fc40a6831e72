"""Outbound BasicHTTP POSTs, on httpcore, behind the host's ``OutboundPolicy``.

Needs the ``http`` extra (``pip install statifier[http]``). ``BasicHTTPClient.post``
checks the URL against the policy, resolves the host itself, checks every address it
resolves to (all must be allowed: a name that resolves to a public and an internal address
is refused), and connects to a checked address, so what was checked is what is reached.
TLS is verified against the host name. Redirects are never followed, no proxy is read
from the environment, one attempt is bounded by ``policy.timeout_s`` from resolution to the
answer's status, and the answer's body is not read.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterable
from types import TracebackType
from typing import Final, Self

import httpcore

from statifier import __version__, instrumentation

from ._errors import PostFailed, PostRefused
from ._message import OutboundRequest
from ._policy import OutboundPolicy

USER_AGENT: Final = f"statifier-basichttp/{__version__}"
"""The ``User-Agent`` of outbound POSTs: ``statifier-basichttp/`` and the installed
statifier's version."""

_RETRIED_STATUSES: Final = frozenset({408, 425, 429})
"""4xx answers that may go otherwise later (besides every 5xx)."""


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """Resolves a host itself and connects only to addresses the policy allows."""

    def __init__(self, policy: OutboundPolicy) -> None:
        self._policy = policy
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await _resolve(host, port)
        for address in addresses:
            self._policy.check_address(address)
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None  # noqa: S101 - _resolve returns at least one address
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise PostRefused("a BasicHTTP POST never goes to a Unix socket")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


async def _resolve(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to (each once, in the resolver's order)."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise httpcore.ConnectError(f"cannot resolve {host[:255]}: {exc}") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise httpcore.ConnectError(f"{host[:255]} resolves to no address")
    return addresses


class BasicHTTPClient:
    """Makes outbound BasicHTTP POSTs under ``policy`` (see the module docstring).

    One client keeps a small pool of connections (at most ``max_connections``); use it
    as an async context manager, or ``aclose`` it. ``post`` answers the 2xx status, or
    raises ``PostRefused`` (the policy says no: final) or ``PostFailed`` (made, and did not
    succeed; ``retry`` says whether trying again may help).
    """

    def __init__(self, policy: OutboundPolicy, *, max_connections: int = 20) -> None:
        if not isinstance(policy, OutboundPolicy):
            raise TypeError(f"policy must be an OutboundPolicy, not {policy!r}")
        self.policy = policy
        self._max_connections = max_connections
        self._pool: httpcore.AsyncConnectionPool | None = None

    def _connections(self) -> httpcore.AsyncConnectionPool:
        if self._pool is None:
            self._pool = httpcore.AsyncConnectionPool(
                network_backend=_GuardedBackend(self.policy),
                max_connections=self._max_connections,
                keepalive_expiry=30.0,
            )
        return self._pool

    async def post(self, request: OutboundRequest, *, idempotency_key: str | None = None) -> int:
        """POST ``request``; its 2xx status (see the class docstring). ``idempotency_key``
        is sent as the ``Idempotency-Key`` header: the same for every attempt of one send,
        so a receiver that honours it applies the send once. With tracing on, the current
        trace goes along as ``traceparent`` (and ``tracestate``), so a receiver that reads
        them continues the sender's trace; baggage is not sent."""
        policy = self.policy
        policy.check(request)
        headers = [
            ("Content-Type", request.content_type),
            ("User-Agent", USER_AGENT),
            ("Accept", "*/*"),
        ]
        if idempotency_key is not None:
            headers.append(("Idempotency-Key", idempotency_key))
        headers.extend(_trace_headers())
        limit = policy.timeout_s
        timeouts = {"connect": limit, "read": limit, "write": limit, "pool": limit}
        try:
            async with asyncio.timeout(limit):
                async with self._connections().stream(
                    "POST",
                    request.url,
                    headers=headers,
                    content=request.body,
                    extensions={"timeout": timeouts},
                ) as response:
                    status = response.status
        except PostRefused:
            raise
        except TimeoutError:
            raise PostFailed(f"no answer within {limit:g} s") from None
        except httpcore.TimeoutException:
            raise PostFailed(f"timed out (limit {limit:g} s)") from None
        except httpcore.UnsupportedProtocol as exc:
            raise PostRefused(f"the URL cannot be posted to: {exc}") from None
        except (httpcore.NetworkError, httpcore.ProtocolError, OSError) as exc:
            raise PostFailed(f"{type(exc).__name__}: {str(exc)[:300]}") from None
        return _judged(status)

    async def aclose(self) -> None:
        """Close the pooled connections."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


_TRACE_HEADERS: Final = ("traceparent", "tracestate")
"""The W3C trace-context headers an outbound POST carries (never ``baggage``: what a host
puts there is not for every partner a chart names)."""


def _trace_headers() -> list[tuple[str, str]]:
    """The current trace context as headers (none when tracing is off)."""
    carried = instrumentation.carrier()
    if not carried:
        return []
    return [(name, carried[name]) for name in _TRACE_HEADERS if name in carried]


def _judged(status: int) -> int:
    """``status`` if it is a success; ``PostFailed`` otherwise (retried or final)."""
    if 200 <= status < 300:
        return status
    if 300 <= status < 400:
        message = f"answered {status}: a redirect, which BasicHTTP POSTs never follow"
        raise PostFailed(message, status=status, retry=False)
    retry = status >= 500 or status in _RETRIED_STATUSES
    raise PostFailed(f"answered {status}", status=status, retry=retry)
