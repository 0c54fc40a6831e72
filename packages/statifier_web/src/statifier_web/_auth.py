"""Who may call: bearer tokens for the API, a signed session for the console, and the
console's CSRF token.

Tokens are compared as SHA-256 digests with ``hmac.compare_digest``, every configured
token each time, so neither a token's length nor how much of it matched shows in the time
an answer takes. A console session remembers which token logged in (by its digest), so a
token taken out of the configuration ends its sessions at the next request. The CSRF
token is random per session and sent back by every form; the session cookie is also
``SameSite=Strict``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Final

from starlette.requests import HTTPConnection

from ._errors import ApiError
from ._settings import WebSettings

SESSION_TOKEN_KEY: Final = "token"  # noqa: S105 - a session key name, not a secret
"""The session key holding the digest (hex) of the token that logged in."""

SESSION_CSRF_KEY: Final = "csrf"
"""The session key holding the session's CSRF token."""

CSRF_FIELD: Final = "csrf_token"
"""The form field every console form sends the CSRF token in."""

OPEN: Final = "open"
"""What :meth:`Gate.identify` answers for every request of an app that runs open."""


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


class Gate:
    """Checks tokens, sessions and CSRF tokens against the settings."""

    def __init__(self, settings: WebSettings) -> None:
        self.open = settings.open
        self._digests = tuple(_digest(token) for token in settings.tokens)

    def identify(self, token: str | None) -> str | None:
        """The hex digest of the configured token ``token`` is (``OPEN`` for an open app),
        or None. Compares against every token in constant time."""
        if self.open:
            return OPEN
        if token is None:
            return None
        candidate = _digest(token)
        found: bytes | None = None
        for digest in self._digests:
            if hmac.compare_digest(candidate, digest):
                found = digest
        return found.hex() if found is not None else None

    def bearer(self, connection: HTTPConnection) -> str:
        """The caller's identity from ``Authorization: Bearer ...``; 401 otherwise."""
        header = connection.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        identity = self.identify(token.strip() if scheme.lower() == "bearer" else None)
        if identity is None:
            raise ApiError(
                401,
                "unauthorized",
                "a valid bearer token is required (Authorization: Bearer TOKEN)",
            )
        return identity

    def session(self, connection: HTTPConnection) -> str | None:
        """The identity a console session logged in with, if that token is still valid."""
        if self.open:
            return OPEN
        digest = connection.session.get(SESSION_TOKEN_KEY)
        if not isinstance(digest, str):
            return None
        for known in self._digests:
            if hmac.compare_digest(digest.encode(), known.hex().encode()):
                return digest
        return None

    def log_in(self, connection: HTTPConnection, token: str) -> bool:
        """Start a console session for ``token`` (a new CSRF token too); False if the token
        is not a configured one."""
        identity = self.identify(token)
        if identity is None:
            return False
        connection.session.clear()
        connection.session[SESSION_TOKEN_KEY] = identity
        connection.session[SESSION_CSRF_KEY] = secrets.token_urlsafe(32)
        return True


def csrf_token(connection: HTTPConnection) -> str:
    """The session's CSRF token (made on first use)."""
    token = connection.session.get(SESSION_CSRF_KEY)
    if not isinstance(token, str):
        token = secrets.token_urlsafe(32)
        connection.session[SESSION_CSRF_KEY] = token
    return token


def csrf_matches(connection: HTTPConnection, sent: object) -> bool:
    """Whether a form's CSRF field is the session's token (constant time)."""
    token = connection.session.get(SESSION_CSRF_KEY)
    if not isinstance(token, str) or not isinstance(sent, str):
        return False
    return hmac.compare_digest(token.encode(), sent.encode())
