"""The JSON helpers of ``statifier.values`` that hot paths use: the digit-run scan that
decides whether orjson may read a stored document, and the orjson writer for values
already checked to be JSON."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statifier.values import (
    LONG_NUMBER_DIGITS,
    digit_run,
    json_text_utf8,
    json_value_text_utf8,
    read_json,
)

_RUN = re.compile(rb"[0-9]{%d}" % LONG_NUMBER_DIGITS)


@pytest.mark.parametrize(
    ("data", "found"),
    [
        (b"", False),
        (b"1" * 18, False),
        (b"1" * 19, True),
        (b'{"n":' + b"9" * 18 + b"}", False),
        (b'{"n":' + b"9" * 19 + b"}", True),
        (b'{"n":-' + b"1" * 19 + b"}", True),
        (b"[" + b"1" * 9 + b"," + b"1" * 10 + b"]", False),  # 19 digits, not in a row
        (b'"' + "٣".encode() * 19 + b'"', False),  # not ASCII digits
        (b"0123456789" * 2, True),
        (b"x" * 500 + b"5" * 19, True),
    ],
)
def test_a_digit_run_is_that_many_ascii_digits_in_a_row(data: bytes, found: bool) -> None:
    assert digit_run(data, LONG_NUMBER_DIGITS) is found
    assert (_RUN.search(data) is not None) is found


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80), st.integers(1, 25))
def test_a_digit_run_answers_as_a_regex_search(data: bytes, length: int) -> None:
    expected = re.search(rb"[0-9]{%d}" % length, data) is not None
    assert digit_run(data, length) is expected


def test_the_boundary_is_nineteen_digits() -> None:
    assert LONG_NUMBER_DIGITS == 19
    # -(2**63) - 1 has 19 digits and is past what orjson reads as an int.
    assert read_json(b"[-9223372036854775809]") == [-(2**63) - 1]
    assert isinstance(read_json(b"[999999999999999999]")[0], int)  # 18 digits


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8).filter(lambda s: not any("\ud800" <= c <= "\udfff" for c in s)),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_JSON)
def test_the_orjson_writer_reads_back_as_the_standard_writer(value: Any) -> None:
    written = json_value_text_utf8(value)
    assert json.loads(written) == json.loads(json_text_utf8(value))
    assert not written.isascii() or json_text_utf8(value).isascii()


@pytest.mark.parametrize(
    "value",
    [
        {"n": 2**64},  # past orjson's integers
        {"n": -(2**63) - 1},
        {1: "a key that is not a string"},
        ["\ud800"],  # a lone surrogate
    ],
    ids=repr,
)
def test_what_orjson_refuses_is_written_by_the_standard_writer(value: Any) -> None:
    assert json_value_text_utf8(value) == json_text_utf8(value)


def test_characters_beyond_ascii_are_written_as_themselves() -> None:
    assert json_value_text_utf8({"é": "ü"}) == '{"é":"ü"}'
