"""Bounded measurements of values, used before operations whose cost depends on value size.

Because values are immutable they may share sub-containers, so a value occupying little memory
can be enormous when printed or compared element by element (``[s] * 10**6`` where ``s`` is a
long string). Operations that walk a value deeply therefore measure it first, with a walk that
gives up as soon as the measure passes a limit.
"""

from __future__ import annotations

from collections.abc import Sequence

from statifier.datamodel.context import EvalContext, budget_exceeded
from statifier.datamodel.errors import EvaluationError
from statifier.datamodel.limits import MAX_SEQUENCE_LENGTH
from statifier.datamodel.values import Value

# Comparing strings runs at memcmp speed, far faster than one interpreted step, so one work unit
# stands for this many characters.
_CHARS_PER_UNIT = 64
_FLOAT_TEXT = 24
_OTHER_TEXT = 64


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
            if total <= limit:
                stack.extend(item)
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
            total += 1 + len(item)
            if total <= limit:
                stack.extend(item)
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


def charge_deep(context: EvalContext, value: Value, factor: int = 1) -> None:
    """Charge ``factor`` times the deep comparison cost of ``value``."""
    limit = max(context.steps, 0) // max(factor, 1)
    cost = comparison_cost(value, limit)
    if cost is None:
        raise budget_exceeded()
    context.charge(cost * factor)


def check_length(length: int, what: str) -> None:
    """Refuse to build a string or list longer than the sequence limit."""
    if length > MAX_SEQUENCE_LENGTH:
        raise EvaluationError(
            f"{what} would be too long ({length} elements; the limit is {MAX_SEQUENCE_LENGTH})"
        )
