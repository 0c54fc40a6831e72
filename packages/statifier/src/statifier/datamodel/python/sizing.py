"""Bounded measurements of values, used before operations whose cost depends on value size.

Because values are immutable they may share sub-containers, so a value occupying little memory
can be enormous when printed or compared element by element (``[s] * 10**6`` where ``s`` is a
long string). Operations that walk a value deeply therefore measure it first, with a walk that
gives up as soon as the measure passes a limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from statifier.datamodel.python.context import EvalContext, budget_exceeded
from statifier.datamodel.python.errors import EvaluationError
from statifier.datamodel.python.limits import MAX_SEQUENCE_LENGTH
from statifier.datamodel.python.values import Value
from statifier.values import DIGITS_PER_256_BITS

CHARS_PER_UNIT: Final = 64
"""Characters one work unit pays for where C code reads them (compares, scans, searches):
comparing strings runs at memcmp speed, far faster than one interpreted step."""

_SHORT_SEARCH_WINDOW: Final = 2_500
"""Positions in which CPython's substring search may compare a long needle in full.

Its search compares at most a few dozen characters per position of the text (a needle
longer than that switches to the linear two-way algorithm), except in a text shorter than
2,500 characters or in the last 2,000 positions of the adaptive search, where it may
compare the whole needle at each position."""
_FLOAT_TEXT = 24
_OTHER_TEXT = 64
_SHORT_SCALARS: Final = frozenset({float, bool, type(None)})
_NUMBERS_AND_NONE: Final = frozenset({int, float, bool, type(None)})


def _element_types(items: list[Value] | tuple[Value, ...]) -> set[type]:
    # ``map(type, ...)`` runs at C speed, so homogeneous lists are measured without a Python
    # loop over their elements.
    return set(map(type, items))


def _flat_text_length(items: list[Value] | tuple[Value, ...]) -> int | None:
    """Text length of the elements of a list of scalars of one kind, else ``None``."""
    kinds = _element_types(items)
    if kinds <= {int}:
        return (sum(map(int.bit_length, items)) * DIGITS_PER_256_BITS >> 8) + 2 * len(items)
    if kinds <= {str}:
        return sum(map(len, items)) + 2 * len(items)
    if kinds <= _SHORT_SCALARS:
        return _FLOAT_TEXT * len(items)
    return None


def _flat_comparison_cost(items: list[Value] | tuple[Value, ...]) -> int | None:
    """Comparison cost of the elements of a list of scalars, else ``None``."""
    kinds = _element_types(items)
    if kinds <= _NUMBERS_AND_NONE:
        return len(items)
    if kinds <= {str}:
        return len(items) + sum(map(len, items)) // CHARS_PER_UNIT
    return None


def text_length_bound(value: Value, limit: int = MAX_SEQUENCE_LENGTH) -> int:
    """Estimate the length of ``str(value)``; raise :class:`EvaluationError` above ``limit``."""
    total = 0
    stack: list[Value] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item) + 2
        elif isinstance(item, bool) or item is None:
            total += 5
        elif isinstance(item, int):
            total += (item.bit_length() * DIGITS_PER_256_BITS >> 8) + 2
        elif isinstance(item, float):
            total += _FLOAT_TEXT
        elif isinstance(item, list | tuple):
            total += 2 + 2 * len(item)
            if total + 2 * len(item) > limit:
                # Every element needs at least two characters: the limit is exceeded anyway.
                total += 2 * len(item)
            else:
                flat = _flat_text_length(item)
                if flat is None:
                    stack.extend(item)
                else:
                    total += flat
        elif isinstance(item, dict):
            total += 2 + 4 * len(item)
            if total <= limit:
                stack.extend(item.keys())
                stack.extend(item.values())
        else:
            total += _OTHER_TEXT
        if total > limit:
            raise EvaluationError(
                f"value is too large to convert to text (more than {limit} characters)"
            )
    return total


def comparison_cost(value: Value, limit: int) -> int | None:
    """Estimate the work of comparing ``value`` deeply; ``None`` if it exceeds ``limit``."""
    total = 0
    stack: list[Value] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += 1 + len(item) // CHARS_PER_UNIT
        elif isinstance(item, list | tuple):
            total += 1
            # Every element costs at least one unit: no need to look closer if they cannot fit.
            flat = _flat_comparison_cost(item) if total + len(item) <= limit else len(item)
            if flat is None:
                total += len(item)
                if total <= limit:
                    stack.extend(item)
            else:
                total += flat
        elif isinstance(item, dict):
            total += 1 + len(item)
            if total <= limit:
                stack.extend(item.values())
        else:
            total += 1
        if total > limit:
            return None
    return total


def charge_comparison(context: EvalContext, left: Value, right: Value) -> None:
    """Charge the budget for a deep comparison of two containers.

    A deep comparison stops at the end of the smaller operand, so the cheaper one is charged.
    """
    limit = max(context.steps, 0)
    cost = comparison_cost(left, limit)
    if cost is None:
        cost = comparison_cost(right, limit)
        if cost is None:
            raise budget_exceeded()
    context.charge(cost)


def charge_search(context: EvalContext, needle: Value, haystack: Sequence[Value]) -> None:
    """Charge the budget for comparing ``needle`` against every element of ``haystack``."""
    if needle is None or isinstance(needle, int | float):
        # Comparing a number with anything is constant time.
        context.charge(len(haystack) + 1)
        return
    charge_deep(context, haystack)


def charge_deep(context: EvalContext, items: Sequence[Value], factor: int = 1) -> None:
    """Charge ``factor`` times the cost of comparing every element of ``items`` deeply."""
    if isinstance(items, str):
        # The elements of a string are single characters, each compared in constant time.
        context.charge((len(items) + 1) * factor)
        return
    limit = max(context.steps, 0) // max(factor, 1)
    cost = comparison_cost(items, limit)
    if cost is None:
        raise budget_exceeded()
    context.charge(cost * factor)


def text_cost(length: int) -> int:
    """Work units of reading ``length`` characters once at C speed (a scan, a compare)."""
    return length // CHARS_PER_UNIT + 1


def search_cost(length: int, needle: int) -> int:
    """Work units of finding (or counting) a needle of ``needle`` characters in a text of
    ``length``: each position compares up to ``min(needle, 64)`` characters, and in the
    last 2,500 positions (all of them in a short text) possibly the whole needle."""
    if needle > length:
        return 1  # no position to compare at
    work = length * min(max(needle, 1), CHARS_PER_UNIT)
    if needle > CHARS_PER_UNIT:
        work += min(length - needle + 1, _SHORT_SEARCH_WINDOW) * needle
    return work // CHARS_PER_UNIT + 1


def charge_text_search(context: EvalContext, length: int, needle: int) -> None:
    """Charge :func:`search_cost` (inlined for the common short needle)."""
    if 0 < needle <= CHARS_PER_UNIT and needle <= length:
        context.steps -= length * needle // CHARS_PER_UNIT + 1
    else:
        context.steps -= search_cost(length, needle)
    if context.steps < 0:
        raise budget_exceeded()


def charge_text_comparison(context: EvalContext, left: str, right: str) -> None:
    """Charge comparing two strings: it reads at most the shorter one (nothing below 64
    characters, so the short strings of conditions cost what they always did)."""
    if len(left) >= CHARS_PER_UNIT <= len(right):
        context.charge(min(len(left), len(right)) // CHARS_PER_UNIT)


def charge_key(context: EvalContext, key: str) -> None:
    """Charge looking a string key up in a dict: hashing it (once per string) and comparing
    it with an equal key read it whole (nothing below 64 characters)."""
    if len(key) >= CHARS_PER_UNIT:
        context.charge(len(key) // CHARS_PER_UNIT)


def check_length(length: int, what: str) -> None:
    """Refuse to build a string or list longer than the sequence limit."""
    if length > MAX_SEQUENCE_LENGTH:
        raise EvaluationError(
            f"{what} would be too long ({length} items; the limit is {MAX_SEQUENCE_LENGTH})"
        )
