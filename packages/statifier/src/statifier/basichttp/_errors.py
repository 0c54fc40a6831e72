"""The errors of the BasicHTTP Event I/O processor (``statifier.basichttp``)."""

from __future__ import annotations

from statifier.errors import StatifierError


class BasicHTTPError(StatifierError):
    """Base class of the BasicHTTP Event I/O processor's errors."""


class PostRefused(BasicHTTPError):
    """An outbound POST the host does not make: its URL, port or address is not on the
    allow-list (``OutboundPolicy``), its message is too large, or the host has no
    BasicHTTP client. Final: the chart hears ``error.communication`` at once."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PostFailed(BasicHTTPError):
    """An outbound POST was made and did not succeed: no connection, a timeout, or an
    answer other than 2xx (``status``). ``retry`` says whether trying again may help
    (network errors, timeouts, 408, 425, 429 and 5xx answers); a 3xx (redirects are not
    followed) or another 4xx is final. ``attempts`` is how many were made, when known."""

    def __init__(
        self,
        reason: str,
        *,
        status: int | None = None,
        retry: bool = True,
        attempts: int | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.retry = retry
        self.attempts = attempts


class PostRejected(BasicHTTPError):
    """An inbound POST cannot be formed into an SCXML event (SCXML D.2: the host answers
    with an HTTP error): ``status`` is the HTTP status to answer (400 malformed, 413 too
    large, 415 an unsupported content type), ``reason`` says why."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
