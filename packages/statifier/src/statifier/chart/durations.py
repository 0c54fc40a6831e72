"""Parsing ``<send delay>`` durations into whole milliseconds."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

from statifier.errors import StatifierError
from statifier.values import brief

# Every spelling a delay may use, by unit. SCXML takes CSS2 times (``5s``, ``100ms``; CSS
# units are case-insensitive); the rest are what people write in charts and on command
# lines. docs/charts.md ("Delays") prints this table: change both together.
_SPELLINGS: dict[str, tuple[str, ...]] = {
    "ms": ("ms", "msec", "msecs", "millisecond", "milliseconds"),
    "s": ("s", "sec", "secs", "second", "seconds"),
    "m": ("m", "min", "mins", "minute", "minutes"),
    "h": ("h", "hr", "hrs", "hour", "hours"),
    "d": ("d", "day", "days"),
    "w": ("w", "wk", "wks", "week", "weeks"),
}
_UNIT_MS = {
    "ms": Decimal(1),
    "s": Decimal(1_000),
    "m": Decimal(60_000),
    "h": Decimal(3_600_000),
    "d": Decimal(86_400_000),
    "w": Decimal(604_800_000),
}
_UNIT_OF = {spelling: unit for unit, names in _SPELLINGS.items() for spelling in names}
_TERM = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]+)\s*")

MAX_DURATION_LENGTH = 64
"""Longer delay strings are refused before they are read: no real delay needs more digits,
and reading a million of them takes seconds."""

MAX_DELAY_MS = 100 * 365 * 86_400_000
"""The longest delay accepted (a century); longer ones are almost certainly mistakes."""


class InvalidDuration(StatifierError, ValueError):
    """A delay that is not a duration we understand."""


def parse_duration(text: str) -> int:
    """``"7d"``, ``"15min"``, ``"1.5s"``, ``"250ms"``, ``"1h 30m"`` -> milliseconds.

    A duration is one or more terms, each a decimal number and a unit (any spelling of
    ``_SPELLINGS``, any case), largest unit first, each unit at most once, optionally
    separated by spaces. Fractions of a millisecond round half up. Raises
    ``InvalidDuration``.
    """
    if len(text) > MAX_DURATION_LENGTH:
        raise InvalidDuration(
            f"invalid duration {brief(text)}: longer than {MAX_DURATION_LENGTH} characters"
        )
    total = Decimal(0)
    previous: Decimal | None = None
    position = 0
    while position < len(text) or previous is None:
        match = _TERM.match(text, position)
        if match is None:
            raise InvalidDuration(
                f"invalid duration {text!r}: expected a number and a unit "
                "(ms, s, min, h, d or w), e.g. '7d', '15min' or '1h 30m'"
            )
        unit = _UNIT_OF.get(match.group(2).lower())
        if unit is None:
            raise InvalidDuration(
                f"invalid duration {text!r}: unknown unit {match.group(2)!r} "
                "(ms, s, min, h, d or w)"
            )
        size = _UNIT_MS[unit]
        if previous is not None and size >= previous:
            raise InvalidDuration(
                f"invalid duration {text!r}: units go from the largest to the smallest, "
                "each once (e.g. '1h 30m')"
            )
        total += Decimal(match.group(1)) * size
        previous = size
        position = match.end()
    millis = int(total.to_integral_value(rounding="ROUND_HALF_UP"))
    if millis > MAX_DELAY_MS:
        raise InvalidDuration(f"duration {text!r} is longer than a century")
    return millis


_DISPLAY_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000))


def format_duration(millis: int) -> str:
    """Milliseconds as people write them: ``7d``, ``7d 2h``, ``90s`` -> ``1m 30s``, ``250ms``.

    The one duration formatter of the engine and its command lines. Days, hours and minutes
    are whole; seconds may carry a fraction (``1.5s``); units go from the largest down,
    separated by a space. Negative durations keep their sign. ``parse_duration`` reads
    every result back.
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
    return " ".join(parts)


def span_ms(span: str | int | timedelta) -> int:
    """A span of time as whole milliseconds: a duration string (``"7d"``, ``"1h 30m"``,
    read by :func:`parse_duration`), an ``int`` of milliseconds, or a ``timedelta``
    (rounded half up to the millisecond). Negative spans and spans longer than a century
    raise ``InvalidDuration``."""
    if isinstance(span, str):
        return parse_duration(span)
    if isinstance(span, timedelta):
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
