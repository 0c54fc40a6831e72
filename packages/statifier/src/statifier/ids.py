"""Session ids: minted outside the pure core's deterministic state."""

from __future__ import annotations

import secrets
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _base32(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_session_id() -> str:
    """``sess_`` + Crockford base32 of a 48-bit millisecond timestamp and 80 random bits.

    Ids minted later sort later (to the millisecond), which keeps logs and tables tidy.
    """
    millis = time.time_ns() // 1_000_000 & ((1 << 48) - 1)
    return "sess_" + _base32(millis, 10) + _base32(secrets.randbits(80), 16)
