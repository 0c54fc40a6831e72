"""Parsing ``<send delay>`` durations into whole milliseconds."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal, InvalidOperation

from statifier.errors import StatifierError
from statifier.values import brief

_UNIT_MS = {
    "ms": Decimal(1),
    "s": Decimal(1_000),
    "m": Decimal(60_000),
    "h": Decimal(3_600_000),
    "d": Decimal(86_400_000),
    "w": Decimal(604_800_000),
}
_AMOUNT = r"(\d+(?:\.\d*)?|\.\d+)"
_UNIT = r"(ms|s|m|h|d|w)"
_DURATION = re.compile(rf"^\s*{_AMOUNT}\s*{_UNIT}\s*$")
_PART = rf"{_AMOUNT}{_UNIT}"
_SPAN = re.compile(rf"(?:{_PART})+")

MAX_DURATION_LENGTH = 64
"""Longer delay strings are refused before they are read: no real delay needs more digits,
and reading a million of them takes seconds."""

MAX_DELAY_MS = 100 * 365 * 86_400_000
"""The longest delay accepted (a century); longer ones are almost certainly mistakes."""


class InvalidDuration(StatifierError, ValueError):
    """A delay that is not a duration we understand."""


def parse_duration(text: str) -> int:
    """``"7d"``, ``"24h"``, ``".5s"``, ``"1.5s"``, ``"250ms"`` -> milliseconds.

    Fractions of a millisecond round half up. Raises ``InvalidDuration``.
    """
    if len(text) > MAX_DURATION_LENGTH:
        raise InvalidDuration(
            f"invalid duration {brief(text)}: longer than {MAX_DURATION_LENGTH} characters"
        )
    match = _DURATION.match(text)
    if match is None:
        raise InvalidDuration(
            f"invalid duration {text!r}: expected a number and a unit "
            "(ms, s, m, h, d or w), e.g. '7d' or '.5s'"
        )
    try:
        amount = Decimal(match.group(1))
    except InvalidOperation:  # pragma: no cover - the regex admits only decimals
        raise InvalidDuration(f"invalid duration {text!r}") from None
    millis = int((amount * _UNIT_MS[match.group(2)]).to_integral_value(rounding="ROUND_HALF_UP"))
    if millis > MAX_DELAY_MS:
        raise InvalidDuration(f"duration {text!r} is longer than a century")
    return millis


_DISPLAY_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000))


def format_duration(millis: int) -> str:
    """Milliseconds as people write them: ``7d``, ``1d6h``, ``90s`` -> ``1m30s``, ``250ms``.

    Days, hours and minutes are whole; seconds may carry a fraction (``1.5s``). Negative
    durations keep their sign. The inverse of ``parse_duration`` for single-unit results.
    """
    if millis < 0:
        return "-" + format_duration(-millis)
    if millis < 1_000:
        return f"{millis}ms"
    parts: list[str] = []
    rest = millis
    for unit, size in _DISPLAY_UNITS:
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    if rest:
        seconds, fraction = divmod(rest, 1_000)
        parts.append(f"{seconds}.{fraction:03d}".rstrip("0").rstrip(".") + "s")
    return "".join(parts)


def span_ms(span: str | int | timedelta) -> int:
    """A span of time as whole milliseconds: a duration string (``"7d"``, or several
    units as :func:`format_duration` writes them, ``"6d23h59m"``), an ``int`` of
    milliseconds, or a ``timedelta`` (rounded half up to the millisecond). Negative spans
    and spans longer than a century raise ``InvalidDuration``."""
    if isinstance(span, str):
        if _DURATION.match(span) or len(span) > MAX_DURATION_LENGTH:
            return parse_duration(span)
        text = span.strip()
        if not _SPAN.fullmatch(text):
            return parse_duration(span)  # raises, saying what a duration looks like
        millis = sum(parse_duration(part.group(0)) for part in re.finditer(_PART, text))
    elif isinstance(span, timedelta):
        millis = int(
            (Decimal(span // timedelta(microseconds=1)) / 1000).to_integral_value(
                rounding="ROUND_HALF_UP"
            )
        )
    elif isinstance(span, int) and not isinstance(span, bool):
        millis = span
    else:
        raise InvalidDuration(
            f"a span is a duration string, milliseconds or a timedelta, not {brief(span)}"
        )
    if millis < 0:
        raise InvalidDuration("a span of time cannot be negative")
    if millis > MAX_DELAY_MS:
        raise InvalidDuration("a span of time longer than a century is almost certainly a mistake")
    return millis
