"""The BasicHTTP locations of sessions and executions, and the capability each carries.

A location is ``{base}/basichttp/{id}/{capability}``: the id percent-encoded as one path
segment, and the capability the first 32 characters of the URL-safe base64 of
HMAC-SHA256(key, tag NUL id), where the tag is ``basichttp`` for a durable execution and
``basichttp-session`` for a live session (so an execution's location never reaches a live
session of the same id). Whoever holds a location may POST events to it, and nobody can
make one without the key: the capability is the credential (192 bits). Every node with
the same base and key gives an id the same location, across restarts.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from typing import Final, Literal, Self
from urllib.parse import quote

from statifier.core.planner import is_http_url

from ._errors import BasicHTTPError

CAPABILITY_LENGTH: Final = 32
"""Characters of a capability (URL-safe base64: 192 bits)."""

MIN_KEY_BYTES: Final = 16
"""The shortest key a ``Locations`` accepts."""

PATH: Final = "basichttp"
"""The path segment under the base URL that every location starts with."""

URL_ENV: Final = "STATIFIER_BASICHTTP_URL"
"""The environment variable holding the base URL of the locations (``Locations.from_env``)."""

KEY_ENV: Final = "STATIFIER_BASICHTTP_KEY"
"""The environment variable holding the key of the capabilities (UTF-8, at least 16 bytes)."""

Kind = Literal["execution", "session"]
"""What a location reaches: a durable execution, or a live session."""

_TAGS: Final[dict[Kind, bytes]] = {"execution": b"basichttp", "session": b"basichttp-session"}


class Locations:
    """Mints and checks BasicHTTP locations under ``base_url`` with ``key`` (see the module
    docstring). ``base_url`` is the URL at which the host's ASGI app is reached from
    outside (its mount path included), an absolute http(s) URL; ``key`` is a secret of at
    least 16 bytes shared by every process that creates executions or serves the app."""

    __slots__ = ("_base", "_key")

    def __init__(self, base_url: str, key: bytes) -> None:
        if not isinstance(base_url, str) or not is_http_url(base_url):
            raise BasicHTTPError(f"base_url must be an absolute http(s) URL, not {base_url!r:.200}")
        if "?" in base_url or "#" in base_url:
            raise BasicHTTPError("base_url must have no query or fragment")
        if not isinstance(key, bytes) or len(key) < MIN_KEY_BYTES:
            raise BasicHTTPError(f"the BasicHTTP key must be bytes, at least {MIN_KEY_BYTES}")
        self._base = base_url.rstrip("/")
        self._key = key

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Self | None:
        """The locations the environment describes: ``STATIFIER_BASICHTTP_URL`` (the base
        URL) and ``STATIFIER_BASICHTTP_KEY`` (the key, UTF-8); None when the URL is unset.
        ``BasicHTTPError`` names the variable that is wrong or missing."""
        url = environ.get(URL_ENV, "").strip()
        if not url:
            return None
        key = environ.get(KEY_ENV, "")
        if not key:
            raise BasicHTTPError(f"${URL_ENV} is set: ${KEY_ENV} must hold the key too")
        try:
            return cls(url, key.encode("utf-8"))
        except BasicHTTPError as exc:
            raise BasicHTTPError(f"${URL_ENV}/${KEY_ENV}: {exc}") from None

    @property
    def base_url(self) -> str:
        """The base URL, without a trailing slash."""
        return self._base

    def capability(self, id_: str, kind: Kind = "execution") -> str:
        """The capability of the location of ``id_`` (an execution's, or a session's)."""
        digest = hmac.new(self._key, _TAGS[kind] + b"\0" + id_.encode("utf-8"), hashlib.sha256)
        return base64.urlsafe_b64encode(digest.digest()).decode("ascii")[:CAPABILITY_LENGTH]

    def location(self, id_: str, kind: Kind = "execution") -> str:
        """The URL at which a POST reaches execution (or live session) ``id_``."""
        return f"{self._base}/{PATH}/{quote(id_, safe='')}/{self.capability(id_, kind)}"

    def verify(self, id_: str, capability: str, kind: Kind = "execution") -> bool:
        """Whether ``capability`` is that of ``id_``'s location (compared in constant time)."""
        return hmac.compare_digest(
            self.capability(id_, kind).encode("ascii"), capability.encode("utf-8", "replace")
        )

    def __repr__(self) -> str:
        return f"Locations({self._base!r}, key=<{len(self._key)} bytes>)"
