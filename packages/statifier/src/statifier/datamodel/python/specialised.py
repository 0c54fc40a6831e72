"""Specialised closures for the commonest expression shapes, each with a general fallback.

A chart's conditions and assignments are mostly ``count + 1``, ``_event.data.amount`` or
``_event.data['amount'] > 50``. The general closures handle every operand type, so they pay
for type dispatch and one call per node. Each builder here returns a closure that does the
common case (plain ints, nested dicts) inline and otherwise calls the general closure of the
same node, which then does exactly what it always did (its checks, its errors, its step
charges). A shortcut only reads, never charges steps and never raises, so falling back from
it is unobservable. (A shortcut that has already evaluated an operand hands the value to the
general operator instead: evaluating it again could charge twice.)
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Final

from statifier.datamodel.python.access import slice_of
from statifier.datamodel.python.context import EvalContext, Evaluator, budget_exceeded
from statifier.datamodel.python.limits import MAX_INT_BITS, MAX_SEQUENCE_LENGTH
from statifier.datamodel.python.operators import BinaryOp, add, concatenate, multiply, subtract
from statifier.datamodel.python.values import Value
from statifier.values import ONE_DIGIT

_INT_LIMIT: Final = 1 << MAX_INT_BITS
"""An int is within ``MAX_INT_BITS`` exactly when its magnitude is below this."""

_NEGATIVE_INT_LIMIT: Final = -_INT_LIMIT
"""``-_INT_LIMIT``, made once: negating it in a check would make a 14,001-bit int."""

_NEGATIVE_ONE_DIGIT: Final = -ONE_DIGIT
"""``-ONE_DIGIT``, made once: a result is checked against one digit before ``_INT_LIMIT``
(a comparison with that one is not specialised)."""

_FACTOR_LIMIT: Final = ONE_DIGIT
"""Factors below this in magnitude have a product far within ``MAX_INT_BITS`` (one digit:
the comparisons with it run specialised)."""

_NEGATIVE_FACTOR_LIMIT: Final = _NEGATIVE_ONE_DIGIT
"""``-_FACTOR_LIMIT``, made once."""

_INT_OPERATIONS: Final[dict[BinaryOp, Callable[[int, int], int]]] = {
    add: operator.add,
    subtract: operator.sub,
}


def path_read(root: str, keys: tuple[str, ...], general: Evaluator) -> Evaluator:
    """``root.k1.k2`` / ``root['k1']['k2']`` read straight through nested dicts.

    Anything else (a missing name or key, a value that is not a dict) is left to
    ``general``, the closure compiled node by node, which reports it as it always did.
    """
    if len(keys) == 1:
        return _read_one(root, keys[0], general)
    if len(keys) == 2:  # ``_event.data.x``, the shape every event-driven chart reads
        return _read_two(root, keys[0], keys[1], general)

    def read_path(context: EvalContext) -> Value:
        try:
            value = context.variables[root]
            for key in keys:
                if type(value) is not dict:
                    return general(context)
                value = value[key]
        except KeyError:
            return general(context)
        return value

    return read_path


def _read_one(root: str, key: str, general: Evaluator) -> Evaluator:
    def read_one(context: EvalContext) -> Value:
        try:
            value = context.variables[root]
            if type(value) is dict:
                return value[key]
        except KeyError:
            pass
        return general(context)

    return read_one


def _read_two(root: str, first: str, second: str, general: Evaluator) -> Evaluator:
    def read_two(context: EvalContext) -> Value:
        try:
            value = context.variables[root]
            if type(value) is dict:
                value = value[first]
                if type(value) is dict:
                    return value[second]
        except KeyError:
            pass
        return general(context)

    return read_two


def int_arithmetic(
    apply: BinaryOp,
    left: Evaluator,
    right: Evaluator,
    right_literal: Value,
    left_name: str | None = None,
) -> Evaluator | None:
    """``+``, ``-`` or ``*`` computed inline when both operands are plain ints (not bools).

    ``right_literal`` is the right operand's literal value when it is an int literal (the
    ``count + 1`` shape: one closure call fewer), else None; ``left_name`` the variable the
    left operand reads when it is a bare name (read inline; a missing one is left to
    ``left``, which reports it). Returns None for operators without a shortcut. Results
    past ``MAX_INT_BITS`` go to ``apply``, which refuses them.
    """
    if apply is multiply:
        if type(right_literal) is int and _NEGATIVE_FACTOR_LIMIT < right_literal < _FACTOR_LIMIT:
            return _times_int(apply, left, right_literal)
        return _int_multiply(apply, left, right)
    compute = _INT_OPERATIONS.get(apply)
    if compute is None:
        return None
    if type(right_literal) is int:
        if left_name is not None:
            return _name_with_int(apply, compute, left, left_name, right_literal)
        return _with_int_literal(apply, compute, left, right_literal)
    if apply is add:
        if left_name is not None:
            return _name_sum_or_concatenation(apply, left, left_name, right)
        return _sum_or_concatenation(apply, left, right)

    def ints(context: EvalContext) -> Value:
        a = left(context)
        b = right(context)
        if type(a) is int and type(b) is int:
            result = compute(a, b)
            if (
                _NEGATIVE_ONE_DIGIT < result < ONE_DIGIT
                or _NEGATIVE_INT_LIMIT < result < _INT_LIMIT
            ):
                return result
        return apply(context, a, b)

    return ints


def _sum_or_concatenation(apply: BinaryOp, left: Evaluator, right: Evaluator) -> Evaluator:
    def sum_or_concatenation(context: EvalContext) -> Value:
        a = left(context)
        b = right(context)
        kind = type(a)
        if kind is int and type(b) is int:
            result = a + b
            if (
                _NEGATIVE_ONE_DIGIT < result < ONE_DIGIT
                or _NEGATIVE_INT_LIMIT < result < _INT_LIMIT
            ):
                return result
        elif kind is list and type(b) is list:
            return concatenate(context, a, b)
        return apply(context, a, b)

    return sum_or_concatenation


def _name_sum_or_concatenation(
    apply: BinaryOp, left: Evaluator, name: str, right: Evaluator
) -> Evaluator:
    def name_sum_or_concatenation(context: EvalContext) -> Value:
        try:
            a = context.variables[name]
        except KeyError:
            a = left(context)  # it reports the missing name
        b = right(context)
        kind = type(a)
        if kind is int and type(b) is int:
            result = a + b
            if (
                _NEGATIVE_ONE_DIGIT < result < ONE_DIGIT
                or _NEGATIVE_INT_LIMIT < result < _INT_LIMIT
            ):
                return result
        elif kind is list and type(b) is list:
            # ``concatenate``, inlined for a result within the length limit.
            length = len(a) + len(b)
            if length <= MAX_SEQUENCE_LENGTH:
                context.steps -= length
                if context.steps < 0:
                    raise budget_exceeded()
                return a + b
            return concatenate(context, a, b)
        return apply(context, a, b)

    return name_sum_or_concatenation


def _times_int(apply: BinaryOp, left: Evaluator, constant: int) -> Evaluator:
    def times_int(context: EvalContext) -> Value:
        a = left(context)
        if type(a) is int and _NEGATIVE_FACTOR_LIMIT < a < _FACTOR_LIMIT:
            return a * constant
        return apply(context, a, constant)

    return times_int


def _name_with_int(
    apply: BinaryOp, compute: Callable[[int, int], int], left: Evaluator, name: str, constant: int
) -> Evaluator:
    if apply is add:

        def name_add_int(context: EvalContext) -> Value:
            try:
                a = context.variables[name]
            except KeyError:
                a = left(context)  # it reports the missing name
            if type(a) is int:
                result = a + constant
                if (
                    _NEGATIVE_ONE_DIGIT < result < ONE_DIGIT
                    or _NEGATIVE_INT_LIMIT < result < _INT_LIMIT
                ):
                    return result
            return apply(context, a, constant)

        return name_add_int

    def name_with_int(context: EvalContext) -> Value:
        try:
            a = context.variables[name]
        except KeyError:
            a = left(context)  # it reports the missing name
        if type(a) is int:
            result = compute(a, constant)
            if (
                _NEGATIVE_ONE_DIGIT < result < ONE_DIGIT
                or _NEGATIVE_INT_LIMIT < result < _INT_LIMIT
            ):
                return result
        return apply(context, a, constant)

    return name_with_int


def compared_read(
    compare: Callable[[Value, Value], bool],
    root: str,
    keys: tuple[str, ...],
    expected: Value,
    general: Evaluator,
) -> Evaluator | None:
    """``read OP literal`` where ``read`` is a variable (``keys`` empty) or a read through
    two spelled-out keys (``_event.data.amount``), the read done inline; anything it cannot
    read (a missing name or key, a value that is not a dict) is left to ``general``, the
    comparison compiled node by node. None for other reads."""
    if not keys:

        def compared_name(context: EvalContext) -> Value:
            try:
                value = context.variables[root]
            except KeyError:
                return general(context)
            return compare(value, expected)

        return compared_name
    if len(keys) != 2:
        return None
    first, second = keys

    def compared_path(context: EvalContext) -> Value:
        try:
            value = context.variables[root]
            if type(value) is not dict:
                return general(context)
            value = value[first]
            if type(value) is not dict:
                return general(context)
            value = value[second]
        except KeyError:
            return general(context)
        return compare(value, expected)

    return compared_path


def _int_multiply(apply: BinaryOp, left: Evaluator, right: Evaluator) -> Evaluator:
    def int_multiply(context: EvalContext) -> Value:
        a = left(context)
        b = right(context)
        if (
            type(a) is int
            and type(b) is int
            and _NEGATIVE_FACTOR_LIMIT < a < _FACTOR_LIMIT
            and _NEGATIVE_FACTOR_LIMIT < b < _FACTOR_LIMIT
        ):
            return a * b
        return apply(context, a, b)

    return int_multiply


def _with_int_literal(
    apply: BinaryOp, compute: Callable[[int, int], int], left: Evaluator, constant: int
) -> Evaluator:
    if apply is add:

        def add_int(context: EvalContext) -> Value:
            a = left(context)
            if type(a) is int:
                result = a + constant
                if (
                    _NEGATIVE_ONE_DIGIT < result < ONE_DIGIT
                    or _NEGATIVE_INT_LIMIT < result < _INT_LIMIT
                ):
                    return result
            return apply(context, a, constant)

        return add_int

    def with_int(context: EvalContext) -> Value:
        a = left(context)
        if type(a) is int:
            result = compute(a, constant)
            if (
                _NEGATIVE_ONE_DIGIT < result < ONE_DIGIT
                or _NEGATIVE_INT_LIMIT < result < _INT_LIMIT
            ):
                return result
        return apply(context, a, constant)

    return with_int


def conjunction(first: Evaluator, second: Evaluator) -> Evaluator:
    """``first and second`` (Python semantics: the operand that decided is the result)."""

    def both(context: EvalContext) -> Value:
        result = first(context)
        if not result:
            return result
        return second(context)

    return both


def disjunction(first: Evaluator, second: Evaluator) -> Evaluator:
    """``first or second`` (Python semantics: the operand that decided is the result)."""

    def either(context: EvalContext) -> Value:
        result = first(context)
        if result:
            return result
        return second(context)

    return either


def constant_slice(container: Evaluator, lower: Value, upper: Value, step: Value) -> Evaluator:
    """``value[lower:upper:step]`` with literal bounds (already checked: ints or None, a
    nonzero step), inline for a list or a string; ``slice_of`` takes every other value."""

    def sliced(context: EvalContext) -> Value:
        value = container(context)
        kind = type(value)
        if kind is list or kind is str:
            result = value[lower:upper:step]
            # ``EvalContext.charge``, inlined.
            context.steps -= len(result) + 1
            if context.steps < 0:
                raise budget_exceeded()
            return result
        return slice_of(context, value, lower, upper, step)

    return sliced
