"""``measure`` of a list of scalars: the count it takes without walking the list (one
loop per kind) against what each item costs alone, and what a position writes.

Every write of a list is measured (``Run.admit``), so the count of a flat list takes a
shortcut; these tests hold it to the walk's answers: the same refusals, never less than
the items measured one by one, never less than the JSON text.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statifier.datamodel.python.sizing import text_length_bound
from statifier.values import MAX_INT_BITS, ValueRefused, measure

_SCALAR = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.sampled_from([0, -1, 2**MAX_INT_BITS, 2**MAX_INT_BITS + 1])
    | st.floats()
    # (Escapes of quotes, backslashes and control characters are not counted: ASCII
    # text here is printable and plain, non-ASCII text counts as its escapes.)
    | st.text(st.characters(min_codepoint=32, max_codepoint=126, exclude_characters='"\\'))
    | st.sampled_from(["\u00e9", "\U0001f600", "plain"])
)

_LIMIT = 2**62

_LENGTHS = st.sampled_from([0, 1, 2, 3, 5, 64, 65, 80])
"""List lengths on either side of ``_SHORT_LIST`` (64)."""


def _one_kind(items: st.SearchStrategy[Any], n: int) -> st.SearchStrategy[list[Any]]:
    """Lists of ``n`` items drawn from ``items``, now and then one of another kind."""
    plain = st.lists(items, min_size=n, max_size=n)
    if n == 0:
        return plain
    odd = st.tuples(plain, st.integers(0, n - 1), _SCALAR).map(
        lambda drawn: [*drawn[0][: drawn[1]], drawn[2], *drawn[0][drawn[1] + 1 :]]
    )
    return plain | odd


def _alone(value: Any) -> int | None:
    """What ``measure`` counts for one item, or None where it refuses it."""
    try:
        return measure(value, _LIMIT)[0]
    except ValueRefused:
        return None


@settings(max_examples=600, deadline=None)
@given(
    items=st.one_of(
        # One kind throughout (the shortcut's case), or any mix (the walk's); short lists
        # and lists past _SHORT_LIST (counted another way).
        _LENGTHS.flatmap(lambda n: _SCALAR.map(lambda v: [v] * n)),
        _LENGTHS.flatmap(lambda n: st.lists(_SCALAR, min_size=n, max_size=n)),
        _LENGTHS.flatmap(lambda n: _one_kind(st.integers(-(2**70), 2**70), n)),
        _LENGTHS.flatmap(lambda n: _one_kind(st.floats(), n)),
        _LENGTHS.flatmap(lambda n: _one_kind(st.booleans(), n)),
        _LENGTHS.flatmap(lambda n: _one_kind(st.sampled_from(["", "a", "bc", "\u00e9"]), n)),
    )
)
def test_a_list_is_refused_exactly_when_an_item_is_and_counts_at_least_its_items(
    items: list[Any],
) -> None:
    each = [_alone(item) for item in items]
    if any(size is None for size in each):
        with pytest.raises(ValueRefused):
            measure(items, _LIMIT)
        return
    size, work = measure(items, _LIMIT)
    # Brackets and separators, then every item at least as it counts alone.
    assert size >= 1 + len(items) + sum(s for s in each if s is not None)
    assert size >= len(json.dumps(items, separators=(",", ":")))
    assert work >= 1


@pytest.mark.parametrize(
    ("items", "refused"),
    [
        ([1, 2, 3], False),
        ([True, False], False),
        ([None, None], False),
        ([1.5, 2.0], False),
        (["ab", "c"], False),
        ([1.5, math.inf], True),
        ([math.nan], True),
        ([2**MAX_INT_BITS], True),
        ([2**102 - 1, 1 - 2**102], False),
        ([1, 2**MAX_INT_BITS], True),
        ([1] * 70 + [2**MAX_INT_BITS], True),
        ([1.5] * 70 + [math.nan], True),
        (["ab"] * 70 + ["\u00e9"], False),
        ([1] * 70 + [True], False),
    ],
)
def test_flat_lists_of_one_kind(items: list[Any], refused: bool) -> None:
    if refused:
        with pytest.raises(ValueRefused):
            measure(items, _LIMIT)
    else:
        assert measure(items, _LIMIT)[0] >= len(json.dumps(items, separators=(",", ":")))


_WIDTHS = [*range(1, 700), *range(700, MAX_INT_BITS, 97), 4085, 4086, MAX_INT_BITS]
"""Every width up to 700 bits (the count first falls short at 103), then a sample."""


def test_an_integer_counts_its_text_to_102_bits_and_within_4_beyond() -> None:
    for bits in _WIDTHS:
        # The widest integer of so many bits, either sign: the most digits it can have.
        short = 0 if bits <= 102 else 4
        for value in (2**bits - 1, 1 - 2**bits):
            text = len(str(value))
            assert text - short <= measure(value, _LIMIT)[0], bits
            assert text - short <= text_length_bound(value, _LIMIT), bits
        assert measure(1 - 2**bits, _LIMIT)[0] == (bits * 77 >> 8) + 2


def test_the_first_integers_counted_short() -> None:
    assert measure(1 - 2**102, _LIMIT)[0] == len(str(1 - 2**102))
    assert measure(1 - 2**103, _LIMIT)[0] == len(str(1 - 2**103)) - 1
    assert measure(2**4085 - 1, _LIMIT)[0] >= len(str(2**4085 - 1))
    assert measure(2**4086 - 1, _LIMIT)[0] == len(str(2**4086 - 1)) - 1
    assert measure(1 - 2**MAX_INT_BITS, _LIMIT)[0] == len(str(1 - 2**MAX_INT_BITS)) - 4


@pytest.mark.parametrize(
    "holder", [lambda v: v, lambda v: {"key": v}, lambda v: [v, "mixed"], lambda v: [[v]]]
)
def test_the_widest_integer_is_stored_and_one_bit_more_is_refused(holder: Any) -> None:
    # Alone, in a dict and in lists the walk reads: each refuses by the integer's bits.
    measure(holder(2**MAX_INT_BITS - 1), _LIMIT)
    measure(holder(1 - 2**MAX_INT_BITS), _LIMIT)
    with pytest.raises(ValueRefused):
        measure(holder(2**MAX_INT_BITS), _LIMIT)
    with pytest.raises(ValueRefused):
        measure(holder(-(2**MAX_INT_BITS)), _LIMIT)


def test_a_bool_among_ints_counts_as_the_word_it_is_written_as() -> None:
    # ``true`` is four characters; an int of one bit counts two.
    assert measure([1, True], _LIMIT)[0] >= len("[1,true]")
    assert measure([True, 1], _LIMIT)[0] >= len("[true,1]")


def test_the_count_of_a_flat_list_is_pinned() -> None:
    # Brackets and separators (2 + n), then each int's bits * 77 // 256 + 2 over the
    # list, five a bool or null, 24 a float, an ASCII string's length and quotes.
    assert measure([1, 2, 3], _LIMIT)[0] == 2 + 3 + (1 + 2 + 2) * 77 // 256 + 6
    assert measure([2**64, 2**64], _LIMIT)[0] == 2 + 2 + 130 * 77 // 256 + 4
    assert measure([True, False, True], _LIMIT)[0] == 2 + 3 + 15
    assert measure([None], _LIMIT)[0] == 2 + 1 + 5
    assert measure([0.5, 1.5], _LIMIT)[0] == 2 + 2 + 48
    assert measure(["ab", "c"], _LIMIT)[0] == 2 + 2 + 3 + 4
    widest = [2**MAX_INT_BITS - 1, 1 - 2**MAX_INT_BITS]
    assert measure(widest, _LIMIT)[0] == 2 + 2 + 2 * MAX_INT_BITS * 77 // 256 + 4
    # Past _SHORT_LIST, counted in C passes: the same counts.
    assert measure([7] * 65, _LIMIT)[0] == 2 + 65 + 65 * 3 * 77 // 256 + 130
    assert measure([None] * 65, _LIMIT)[0] == 2 + 65 + 5 * 65
    assert measure([0.5] * 65, _LIMIT)[0] == 2 + 65 + 24 * 65
