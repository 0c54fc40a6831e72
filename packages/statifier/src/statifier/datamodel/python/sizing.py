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

# Comparing strings runs at memcmp speed, far faster than one interpreted step, so one work unit
# stands for this many characters.
_CHARS_PER_UNIT = 64
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
        return (sum(map(int.bit_length, items)) * 77 >> 8) + 2 * len(items)
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
        return len(items) + sum(map(len, items)) // _CHARS_PER_UNIT
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
            # 77/256 slightly exceeds log10(2), so this never underestimates the digit count.
            total += (item.bit_length() * 77 >> 8) + 2
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
            total += 1 + len(item) // _CHARS_PER_UNIT
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


def check_length(length: int, what: str) -> None:
    """Refuse to build a string or list longer than the sequence limit."""
    if length > MAX_SEQUENCE_LENGTH:
        raise EvaluationError(
            f"{what} would be too long ({length} items; the limit is {MAX_SEQUENCE_LENGTH})"
        )
