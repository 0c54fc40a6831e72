"""Durations: every spelling of docs/charts.md's table, the grammar, and its bounds."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from statifier.chart.durations import (
    MAX_DELAY_MS,
    MAX_DURATION_LENGTH,
    InvalidDuration,
    parse_duration,
    span_ms,
)

DOCS = Path(__file__).resolve().parents[3] / "docs" / "charts.md"
UNIT_MS = {
    "milliseconds": 1,
    "seconds": 1_000,
    "minutes": 60_000,
    "hours": 3_600_000,
    "days": 86_400_000,
    "weeks": 604_800_000,
}


def documented_spellings() -> dict[str, list[str]]:
    """The docs' table of units: unit name -> spellings."""
    rows = re.findall(r"^\| (\w+) \| (`.*`) \|$", DOCS.read_text(), flags=re.MULTILINE)
    return {unit: re.findall(r"`([^`]+)`", spellings) for unit, spellings in rows}


def test_the_docs_table_names_every_unit() -> None:
    assert set(documented_spellings()) == set(UNIT_MS)


@pytest.mark.parametrize(
    ("unit", "spelling"),
    [(unit, s) for unit, spellings in documented_spellings().items() for s in spellings],
)
def test_every_documented_spelling_is_accepted_in_any_case(unit: str, spelling: str) -> None:
    size = UNIT_MS[unit]
    assert parse_duration(f"3{spelling}") == 3 * size
    assert parse_duration(f"3 {spelling.upper()}") == 3 * size
    # Half a millisecond rounds up: 2.5ms is 3.
    assert parse_duration(f"2.5{spelling.capitalize()}") == (5 * size + 1) // 2


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("15min", 900_000),
        ("1h 30m", 5_400_000),
        ("1h30m", 5_400_000),
        ("1d6h", 108_000_000),
        ("7d 2h", 612_000_000),
        ("1m30.5s", 90_500),
        ("  5 s  ", 5_000),
        (".5s", 500),
        ("0.0005s", 1),
        ("0.0004s", 0),
        ("0s", 0),
    ],
)
def test_compound_and_fractional_durations(text: str, millis: int) -> None:
    assert parse_duration(text) == millis


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "expected a number and a unit"),
        ("5", "expected a number and a unit"),
        ("min", "expected a number and a unit"),
        ("-1s", "expected a number and a unit"),
        ("1h,30m", "expected a number and a unit"),
        ("5 parsecs", "unknown unit 'parsecs'"),
        ("30m 1h", "largest to the smallest"),
        ("1h 1h", "largest to the smallest"),
    ],
)
def test_what_is_not_a_duration_is_refused_with_the_reason(text: str, reason: str) -> None:
    with pytest.raises(InvalidDuration, match=re.escape(reason)):
        parse_duration(text)


def test_the_length_bound_is_inclusive() -> None:
    at_limit = "1" + "0" * (MAX_DURATION_LENGTH - 3) + "ms"
    assert len(at_limit) == MAX_DURATION_LENGTH
    with pytest.raises(InvalidDuration, match="longer than a century"):
        parse_duration(at_limit)  # read (not refused for its length), then too long a delay
    with pytest.raises(InvalidDuration, match=f"longer than {MAX_DURATION_LENGTH} characters"):
        parse_duration(" " + at_limit)


def test_a_century_is_the_longest_delay() -> None:
    assert parse_duration(f"{MAX_DELAY_MS}ms") == MAX_DELAY_MS
    assert parse_duration("36500d") == MAX_DELAY_MS
    with pytest.raises(InvalidDuration, match="longer than a century"):
        parse_duration(f"{MAX_DELAY_MS + 1}ms")


def test_a_span_is_a_duration_milliseconds_or_a_timedelta() -> None:
    assert span_ms("1h 30m") == 5_400_000
    assert span_ms(0) == 0
    assert span_ms(MAX_DELAY_MS) == MAX_DELAY_MS
    assert span_ms(timedelta(days=7)) == 604_800_000
    assert span_ms(timedelta(microseconds=1_500)) == 2  # half a millisecond rounds up
    assert span_ms(timedelta(microseconds=1_499)) == 1


@pytest.mark.parametrize(
    ("span", "message"),
    [
        (-1, "cannot be negative"),
        (timedelta(microseconds=-501), "cannot be negative"),
        (MAX_DELAY_MS + 1, "longer than a century"),
        (True, "not True"),
        (1.5, "not 1.5"),
    ],
)
def test_a_span_that_is_no_span_is_refused(span: object, message: str) -> None:
    with pytest.raises(InvalidDuration, match=message):
        span_ms(span)  # type: ignore[arg-type]
