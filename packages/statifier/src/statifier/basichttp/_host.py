"""What a live session needs of the BasicHTTP Event I/O processor, and its retries."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

from ._capability import Locations
from ._errors import BasicHTTPError, PostFailed
from ._message import OutboundRequest
from ._policy import OutboundPolicy

RETRY_FIRST_S: Final = 1.0
"""The wait before a live session's second attempt at a POST (it doubles each time)."""

RETRY_MAX_S: Final = 30.0
"""The longest wait between two attempts at a live session's POST."""

MAX_PENDING_POSTS: Final = 100
"""The POSTs a live session may have under way at once, by default."""


@runtime_checkable
class Poster(Protocol):
    """What makes outbound POSTs under a policy (``statifier.basichttp.client``'s
    ``BasicHTTPClient`` does)."""

    @property
    def policy(self) -> OutboundPolicy:
        """The allow-list and bounds every POST is checked against."""

    async def post(self, request: OutboundRequest, *, idempotency_key: str | None = None) -> int:
        """POST ``request``; its 2xx status, or ``PostRefused``/``PostFailed``."""


@dataclass(frozen=True, slots=True)
class BasicHTTP:
    """A live session's BasicHTTP Event I/O processor (``Session.start(basichttp=...)``):
    ``client`` makes its outbound POSTs (None: every one is refused with
    ``error.communication``), ``locations`` gives it a location, so a host serving the
    location (``statifier_web``) can deliver POSTs to it (None: no ``basichttp`` entry in
    its ``_ioprocessors``). ``max_pending`` bounds the POSTs one session may have under
    way at once (retries included): one more is refused with ``error.communication``.
    Sessions it invokes share it."""

    client: Poster | None = None
    locations: Locations | None = None
    max_pending: int = MAX_PENDING_POSTS

    def __post_init__(self) -> None:
        pending = self.max_pending
        if isinstance(pending, bool) or not isinstance(pending, int) or pending < 1:
            raise BasicHTTPError(f"max_pending must be a positive integer, not {pending!r}")


async def post_with_retries(client: Poster, request: OutboundRequest, key: str) -> int:
    """POST ``request`` up to ``client.policy.attempts`` times while its failures may pass
    (waiting 1 s, then twice as long each time, at most 30 s); its 2xx status, or the last
    ``PostFailed`` with ``attempts`` set, or ``PostRefused``."""
    attempts = client.policy.attempts
    wait = RETRY_FIRST_S
    attempt = 0
    while True:
        attempt += 1
        try:
            return await client.post(request, idempotency_key=key)
        except PostFailed as failure:
            if not failure.retry or attempt >= attempts:
                failure.attempts = attempt
                raise
        await asyncio.sleep(wait)
        wait = min(wait * 2, RETRY_MAX_S)
