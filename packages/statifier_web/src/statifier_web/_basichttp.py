"""The BasicHTTP Event I/O processor's inbound side (SCXML D.2; ADR 33): the route that
turns a POST to an execution's location into an external event.

``POST {base}/basichttp/{id}/{capability}``: outside ``/api`` and its bearer token, the
capability being the credential (``statifier.basichttp.Locations``, from the app's
``Executions``). A capability of an execution steps it once (``Service.step``, with the
``Idempotency-Key`` header as the step key, the history's trigger ``http``); a capability
of a live session (its kind ``session``) queues the event on the session of this process
that holds the id, once per ``Idempotency-Key`` (the session remembers its last
``SESSION_KEYS`` keys). The id is the location's next to last segment as it arrived
(percent-decoded, so an id holding ``/`` is one segment). Every POST is bounded: its body
(``WebSettings.basichttp_max_bytes``, 413) and its rate per location
(``basichttp_rate`` a second, bursts of ``basichttp_burst``; 429 with ``Retry-After``). A
wrong capability and an unknown execution get the same 404, so the answer tells nothing
about which ids exist.
"""

from __future__ import annotations

import hashlib
import math
import time
import weakref
from collections import OrderedDict
from typing import Final
from urllib.parse import unquote

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from statifier.basichttp import Kind, Locations, PostRejected, read_post
from statifier.runtime import registry
from statifier.runtime.session import Session
from statifier_persistence import (
    MAX_KEY_LENGTH,
    AlreadyApplied,
    ExecutionNotFound,
    Trigger,
    triggered_by,
)

from ._errors import ApiError
from ._service import Service
from ._settings import WebSettings

ROUTE: Final = "/basichttp/{location:path}"
"""The route's path under the app (the locations' ``{base}`` is the app's URL)."""

MAX_BUCKETS: Final = 10_000
"""Locations whose rate is remembered; the least recently used is forgotten first."""

MAX_IDEMPOTENCY_KEY: Final = 1024
"""The longest ``Idempotency-Key`` a POST may carry; one longer than a step key
(``MAX_KEY_LENGTH``) is stepped under its digest, ``sha256:<hex>``."""

SESSION_KEYS: Final = 1000
"""The ``Idempotency-Key``s remembered per live session; the oldest is forgotten first."""

TRIGGER: Final = Trigger("http", detail="BasicHTTP POST")
"""Who the history says asked for a step from a POST."""


def nowhere() -> ApiError:
    """404, the same for a wrong capability, an unknown execution and a gone session."""
    return ApiError(404, "location_not_found", "nothing receives events at this location")


class RateLimit:
    """A token bucket per location: ``rate`` a second, at most ``burst`` at once."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = burst
        self._buckets: OrderedDict[tuple[Kind, str], tuple[float, float]] = OrderedDict()

    def wait_s(self, key: tuple[Kind, str], now: float | None = None) -> float:
        """0 if a request to ``key`` may go now (it is counted), else the seconds until one
        may."""
        now = time.monotonic() if now is None else now
        tokens, last = self._buckets.pop(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - last) * self.rate)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            wait = 0.0
        else:
            self._buckets[key] = (tokens, now)
            wait = (1.0 - tokens) / self.rate
        while len(self._buckets) > MAX_BUCKETS:
            self._buckets.popitem(last=False)
        return wait


class RecentKeys:
    """The last ``size`` idempotency keys used with each live session, for as long as the
    session lives (held weakly: a stopped session's keys go with it)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._keys: weakref.WeakKeyDictionary[Session, OrderedDict[str, None]] = (
            weakref.WeakKeyDictionary()
        )

    def first_use(self, session: Session, key: str) -> bool:
        """Whether ``key`` is new to ``session`` (it is remembered from now on)."""
        keys = self._keys.setdefault(session, OrderedDict())
        if key in keys:
            keys.move_to_end(key)
            return False
        keys[key] = None
        while len(keys) > self.size:
            keys.popitem(last=False)
        return True


class BasicHTTPRoute:
    """The route's handler over ``service``'s executions (see the module docstring)."""

    def __init__(self, service: Service, settings: WebSettings) -> None:
        self.service = service
        self.settings = settings
        self.limit = RateLimit(settings.basichttp_rate, settings.basichttp_burst)
        self.session_keys = RecentKeys(SESSION_KEYS)

    @property
    def locations(self) -> Locations | None:
        """The locations of the executions (None: this app receives no POST)."""
        return self.service.executions.basichttp

    async def receive(self, request: Request) -> Response:
        """Receive one POST; see the module docstring."""
        locations = self.locations
        raw_path = request.scope.get("raw_path") or request.url.path.encode("utf-8")
        segments = raw_path.decode("latin-1").split("/")
        if locations is None or len(segments) < 3:
            raise nowhere()
        try:
            id_, capability = unquote(segments[-2], errors="strict"), segments[-1]
        except UnicodeDecodeError:
            raise nowhere() from None
        kind = _kind(locations, id_, capability)
        wait = self.limit.wait_s((kind, id_))
        if wait > 0:
            raise ApiError(
                429,
                "too_many_requests",
                "too many events for this location: try again later",
                {"retry_after_s": math.ceil(wait)},
            )
        body = await self._body(request)
        query = request.scope.get("query_string", b"").decode("latin-1")
        target = raw_path.decode("latin-1") + (f"?{query}" if query else "")
        try:
            received = read_post(
                target,
                request.headers.get("content-type"),
                body,
                max_bytes=self.settings.basichttp_max_bytes,
            )
        except PostRejected as rejected:
            raise ApiError(rejected.status, "not_an_event", rejected.reason) from None
        key = _key(request.headers.get("idempotency-key"))
        if kind == "session":
            session = registry.lookup(id_)
            if session is None:
                raise nowhere()
            if key is not None and not self.session_keys.first_use(session, key):
                return JSONResponse({"already_applied": True}, status_code=200)
            session.send_event(received.event())
            return Response(status_code=202)
        try:
            with triggered_by(TRIGGER):
                result = await self.service.step(id_, received.event(), key)
        except ExecutionNotFound:
            raise nowhere() from None
        if isinstance(result, AlreadyApplied):
            return JSONResponse({"already_applied": True}, status_code=200)
        return Response(status_code=204)

    async def _body(self, request: Request) -> bytes:
        """The body, read no further than the bound (413 past it)."""
        limit = self.settings.basichttp_max_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise _too_large(limit)
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise _too_large(limit)
                chunks.append(chunk)
        except ClientDisconnect:
            raise ApiError(400, "bad_request", "the client went away") from None
        return b"".join(chunks)


def _kind(locations: Locations, id_: str, capability: str) -> Kind:
    """Whose capability ``capability`` is: an execution's or a live session's (404 if
    neither)."""
    if locations.verify(id_, capability):
        return "execution"
    if locations.verify(id_, capability, "session"):
        return "session"
    raise nowhere()


def _key(text: str | None) -> str | None:
    """The ``Idempotency-Key`` header as a step key (400 if it is no key): itself, or
    its digest when it is longer than a step key may be (a sender's key names its own
    execution, whose id may already be as long as a step key)."""
    if text is None:
        return None
    if not 0 < len(text) <= MAX_IDEMPOTENCY_KEY or not text.isprintable() or " " in text:
        raise ApiError(
            400,
            "bad_request",
            f"Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} printable characters"
            " without spaces",
        )
    if len(text) <= MAX_KEY_LENGTH:
        return text
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _too_large(limit: int) -> ApiError:
    return ApiError(
        413, "request_too_large", f"the body is over the {limit} byte limit", {"limit": limit}
    )
