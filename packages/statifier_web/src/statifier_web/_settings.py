"""``WebSettings``: what the app is configured with, checked at construction."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Final

from statifier.basichttp import MAX_INBOUND_BYTES

from ._errors import WebConfigError

MIN_TOKEN_LENGTH: Final = 16
"""The shortest bearer token accepted, in characters (``secrets.token_urlsafe(32)`` gives
43)."""

MAX_TOKEN_LENGTH: Final = 512
"""The longest bearer token accepted, in characters."""

TOKENS_ENV: Final = "STATIFIER_WEB_TOKENS"
"""The environment variable ``statifier-oban web`` reads tokens from (separated by commas
or whitespace), so that no token appears on a command line."""

SESSION_SECRET_ENV: Final = "STATIFIER_WEB_SESSION_SECRET"  # noqa: S105 - a variable name
"""The environment variable holding the key console sessions are signed with; without it a
fresh key per process (everyone logs in again after a restart)."""

_POSITIVE: Final = (
    "max_body_bytes",
    "page_size",
    "session_max_age_s",
    "diagram_timeout_s",
    "max_streams",
    "poll_interval_s",
    "stream_keepalive_s",
    "basichttp_max_bytes",
    "basichttp_rate",
    "basichttp_burst",
)


@dataclass(frozen=True, slots=True)
class WebSettings:
    """How the HTTP API and the console behave.

    ``tokens``: the bearer tokens a request may present (each ``MIN_TOKEN_LENGTH`` to
    ``MAX_TOKEN_LENGTH`` printable characters, no whitespace); at least one is required
    unless ``open`` says to serve without authentication at all (for a console on
    loopback behind your own authenticating proxy, say; the CSRF check stays).
    ``session_secret``: the key console sessions are signed with (at least 32 bytes; None:
    a fresh random key per process). ``secure_cookies``: send the session cookie only over
    HTTPS (set it when the console is served over HTTPS). ``session_max_age_s``: how long a
    console login lasts.

    ``max_body_bytes``: the largest request body (a larger one is refused with 413 before
    it is read). ``page_size``: executions per page of the console's list (the API's
    default too). ``templates``: a folder whose templates override the console's (same
    names, e.g. ``statifier_web/base.html``). ``diagram_timeout_s``: how long Graphviz
    may draw one diagram. ``max_streams``: live-update streams served at once (more are
    answered 503; each holds a database connection of its own while it listens).
    ``poll_interval_s``: how often a live stream asks whether its execution stepped, when
    the executions write no history to follow. ``stream_keepalive_s``: how often an idle
    stream sends a comment, so proxies keep it open.

    ``basichttp_max_bytes``: the largest body a POST to a BasicHTTP location may have.
    ``basichttp_rate`` and ``basichttp_burst``: how many POSTs a location takes a second,
    and at once (more are answered 429).
    """

    tokens: tuple[str, ...] = ()
    open: bool = False
    session_secret: bytes | None = None
    secure_cookies: bool = False
    session_max_age_s: int = 12 * 3600
    max_body_bytes: int = 1024 * 1024
    page_size: int = 50
    templates: Path | None = None
    diagram_timeout_s: float = 10.0
    max_streams: int = 20
    poll_interval_s: float = 0.5
    stream_keepalive_s: float = 15.0
    basichttp_max_bytes: int = MAX_INBOUND_BYTES
    basichttp_rate: float = 10.0
    basichttp_burst: int = 20

    def __post_init__(self) -> None:
        if not isinstance(self.tokens, tuple):
            raise WebConfigError(f"tokens must be a tuple of strings, not {self.tokens!r}")
        for token in self.tokens:
            check_token(token)
        if not self.tokens and not self.open:
            raise WebConfigError(
                "no bearer token: give at least one (e.g. python -c 'import secrets; "
                "print(secrets.token_urlsafe(32))'), or say open=True to serve without "
                "authentication"
            )
        if self.tokens and self.open:
            raise WebConfigError("open=True serves without authentication: give no tokens")
        secret = self.session_secret
        if secret is not None and (not isinstance(secret, bytes) or len(secret) < 32):
            raise WebConfigError("session_secret must be at least 32 bytes")
        for field in fields(self):
            if field.name in _POSITIVE:
                value = getattr(self, field.name)
                if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                    raise WebConfigError(f"{field.name} must be a positive number, not {value!r}")
        if self.templates is not None and not Path(self.templates).is_dir():
            raise WebConfigError(f"templates: {self.templates} is not a folder")


def check_token(token: object) -> str:
    """A bearer token as configured; ``WebConfigError`` (without the token) if unfit."""
    if not isinstance(token, str):
        raise WebConfigError(f"a token must be a string, not {type(token).__name__}")
    if not MIN_TOKEN_LENGTH <= len(token) <= MAX_TOKEN_LENGTH:
        raise WebConfigError(
            f"a token must be {MIN_TOKEN_LENGTH} to {MAX_TOKEN_LENGTH} characters long, "
            f"not {len(token)}"
        )
    if not token.isprintable() or any(ch.isspace() for ch in token) or not token.isascii():
        raise WebConfigError("a token must be printable ASCII without whitespace")
    return token


def tokens_from_environment(environ: dict[str, str] | None = None) -> tuple[str, ...]:
    """The tokens in ``$STATIFIER_WEB_TOKENS`` (commas or whitespace between them)."""
    text = (os.environ if environ is None else environ).get(TOKENS_ENV, "")
    return tuple(part for part in text.replace(",", " ").split() if part)


def tokens_from_file(path: Path) -> tuple[str, ...]:
    """The tokens in a file, one a line (blank lines and ``#`` comments skipped)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise WebConfigError(f"cannot read tokens from {path}: {exc}") from None
    return tuple(
        stripped
        for line in text.splitlines()
        if (stripped := line.strip()) and not stripped.startswith("#")
    )
