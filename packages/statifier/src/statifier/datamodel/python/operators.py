"""Arithmetic, bitwise, unary and comparison operators with bounded cost.

Each operator accepts only the operand types that make sense for JSON-like values and refuses
results that would be too large before computing them.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from typing import Final

from statifier.datamodel.python.context import EvalContext
from statifier.datamodel.python.errors import EvaluationError
from statifier.datamodel.python.limits import MAX_INT_BITS, MAX_POWER_EXPONENT
from statifier.datamodel.python.sizing import (
    charge_comparison,
    charge_key,
    charge_search,
    charge_text_comparison,
    charge_text_search,
    check_length,
)
from statifier.datamodel.python.values import Value, type_name

BinaryOp = Callable[[EvalContext, Value, Value], Value]
"""A binary operator: ``(context, left, right) -> result``."""

UnaryOp = Callable[[Value], Value]
"""A unary operator."""

CompareOp = Callable[[EvalContext, Value, Value], bool]
"""A comparison operator: ``(context, left, right) -> bool``."""

_NUMBER: Final = (int, float)
_CONTAINER: Final = (list, dict)
_SEQUENCE: Final = (str, list)
_CHARGED: Final = (list, dict, str)


def _unsupported(symbol: str, left: Value, right: Value) -> EvaluationError:
    return EvaluationError(
        f"unsupported operand types for {symbol}: '{type_name(left)}' and '{type_name(right)}'"
    )


def check_int(result: Value) -> Value:
    """Refuse integers beyond :data:`MAX_INT_BITS`; return other values unchanged."""
    if type(result) is int and result.bit_length() > MAX_INT_BITS:
        raise EvaluationError(f"integer result is too large (more than {MAX_INT_BITS} bits)")
    return result


def _check_float(result: Value) -> Value:
    if isinstance(result, complex):
        raise EvaluationError("operation produced a complex number, which is not supported")
    return result


def _both_ints(left: Value, right: Value) -> bool:
    return isinstance(left, int) and isinstance(right, int)


def add(context: EvalContext, left: Value, right: Value) -> Value:
    """``left + right`` for numbers, strings and lists."""
    if isinstance(left, _NUMBER) and isinstance(right, _NUMBER):
        return check_int(left + right)
    if (isinstance(left, str) and isinstance(right, str)) or (
        isinstance(left, list) and isinstance(right, list)
    ):
        return concatenate(context, left, right)
    raise _unsupported("+", left, right)


def concatenate(context: EvalContext, left: Value, right: Value) -> Value:
    """``left + right`` for two strings or two lists, charged by the result's length."""
    length = len(left) + len(right)
    check_length(length, "concatenation result")
    context.charge(length)
    return left + right


def subtract(context: EvalContext, left: Value, right: Value) -> Value:
    """``left - right`` for numbers."""
    if isinstance(left, _NUMBER) and isinstance(right, _NUMBER):
        return check_int(left - right)
    raise _unsupported("-", left, right)


def _repeat(context: EvalContext, sequence: str | list[Value], count: int) -> Value:
    length = len(sequence) * max(count, 0)
    check_length(length, "repetition result")
    context.charge(length)
    return sequence * count


def multiply(context: EvalContext, left: Value, right: Value) -> Value:
    """``left * right`` for numbers, or repetition of a string or list by an integer."""
    if isinstance(left, _NUMBER) and isinstance(right, _NUMBER):
        if (
            isinstance(left, int)
            and isinstance(right, int)
            and left.bit_length() + right.bit_length() > MAX_INT_BITS + 1
        ):
            raise EvaluationError(f"integer result is too large (more than {MAX_INT_BITS} bits)")
        return check_int(left * right)
    if isinstance(left, _SEQUENCE) and isinstance(right, int):
        return _repeat(context, left, right)
    if isinstance(left, int) and isinstance(right, _SEQUENCE):
        return _repeat(context, right, left)
    raise _unsupported("*", left, right)


def true_divide(context: EvalContext, left: Value, right: Value) -> Value:
    """``left / right`` for numbers."""
    if isinstance(left, _NUMBER) and isinstance(right, _NUMBER):
        return left / right
    raise _unsupported("/", left, right)


def floor_divide(context: EvalContext, left: Value, right: Value) -> Value:
    """``left // right`` for numbers."""
    if isinstance(left, _NUMBER) and isinstance(right, _NUMBER):
        return check_int(left // right)
    raise _unsupported("//", left, right)


def modulo(context: EvalContext, left: Value, right: Value) -> Value:
    """``left % right`` for numbers (``%`` string formatting is not supported)."""
    if isinstance(left, _NUMBER) and isinstance(right, _NUMBER):
        return check_int(left % right)
    if isinstance(left, str):
        raise EvaluationError("'%' string formatting is not supported; use an f-string")
    raise _unsupported("%", left, right)


def power(context: EvalContext, left: Value, right: Value) -> Value:
    """``left ** right`` for numbers, refusing huge integer results before computing them."""
    if not (isinstance(left, _NUMBER) and isinstance(right, _NUMBER)):
        raise _unsupported("**", left, right)
    if isinstance(left, int) and isinstance(right, int):
        if abs(right) > MAX_POWER_EXPONENT:
            raise EvaluationError(
                f"exponent is too large (the limit is {MAX_POWER_EXPONENT} in magnitude)"
            )
        if right > 0 and max(left.bit_length() - 1, 0) * right >= MAX_INT_BITS:
            raise EvaluationError(f"integer result is too large (more than {MAX_INT_BITS} bits)")
        return check_int(left**right)
    return _check_float(left**right)


def _require_ints(symbol: str, left: Value, right: Value) -> None:
    if not _both_ints(left, right):
        raise _unsupported(symbol, left, right)


def left_shift(context: EvalContext, left: Value, right: Value) -> Value:
    """``left << right`` for integers, with a bounded shift count."""
    _require_ints("<<", left, right)
    if right < 0:
        raise EvaluationError("negative shift count")
    if left and left.bit_length() + right > MAX_INT_BITS:
        raise EvaluationError(f"integer result is too large (more than {MAX_INT_BITS} bits)")
    return left << right if left else 0


def right_shift(context: EvalContext, left: Value, right: Value) -> Value:
    """``left >> right`` for integers."""
    _require_ints(">>", left, right)
    if right < 0:
        raise EvaluationError("negative shift count")
    return left >> right


def bit_and(context: EvalContext, left: Value, right: Value) -> Value:
    """``left & right`` for integers."""
    _require_ints("&", left, right)
    return left & right


def bit_or(context: EvalContext, left: Value, right: Value) -> Value:
    """``left | right`` for integers."""
    _require_ints("|", left, right)
    return left | right


def bit_xor(context: EvalContext, left: Value, right: Value) -> Value:
    """``left ^ right`` for integers."""
    _require_ints("^", left, right)
    return left ^ right


BINARY_OPERATORS: Final[Mapping[type[ast.operator], tuple[str, BinaryOp]]] = {
    ast.Add: ("+", add),
    ast.Sub: ("-", subtract),
    ast.Mult: ("*", multiply),
    ast.Div: ("/", true_divide),
    ast.FloorDiv: ("//", floor_divide),
    ast.Mod: ("%", modulo),
    ast.Pow: ("**", power),
    ast.LShift: ("<<", left_shift),
    ast.RShift: (">>", right_shift),
    ast.BitAnd: ("&", bit_and),
    ast.BitOr: ("|", bit_or),
    ast.BitXor: ("^", bit_xor),
}
"""Allowed binary operators by AST operator type, with their symbols."""


def negate(operand: Value) -> Value:
    """``-operand`` for numbers."""
    if isinstance(operand, _NUMBER):
        return -operand
    raise EvaluationError(f"bad operand type for unary -: '{type_name(operand)}'")


def positive(operand: Value) -> Value:
    """``+operand`` for numbers."""
    if isinstance(operand, _NUMBER):
        return +operand
    raise EvaluationError(f"bad operand type for unary +: '{type_name(operand)}'")


def invert(operand: Value) -> Value:
    """``~operand`` for integers (booleans excluded: Python deprecates ``~True``)."""
    if type(operand) is int:
        return ~operand
    raise EvaluationError(f"bad operand type for unary ~: '{type_name(operand)}'")


def logical_not(operand: Value) -> Value:
    """``not operand``."""
    return not operand


UNARY_OPERATORS: Final[Mapping[type[ast.unaryop], UnaryOp]] = {
    ast.USub: negate,
    ast.UAdd: positive,
    ast.Invert: invert,
    ast.Not: logical_not,
}
"""Allowed unary operators by AST operator type."""


def _guard_containers(context: EvalContext, left: Value, right: Value) -> None:
    """Charge comparing two containers deeply, or two strings over the shorter's length."""
    # One check for the common operands (numbers, None): they cost nothing.
    if isinstance(left, _CHARGED):
        if isinstance(left, str):
            if isinstance(right, str):
                charge_text_comparison(context, left, right)
        elif isinstance(right, _CONTAINER):
            charge_comparison(context, left, right)


def equal(context: EvalContext, left: Value, right: Value) -> bool:
    """``left == right``."""
    _guard_containers(context, left, right)
    return bool(left == right)


def not_equal(context: EvalContext, left: Value, right: Value) -> bool:
    """``left != right``."""
    _guard_containers(context, left, right)
    return bool(left != right)


def less(context: EvalContext, left: Value, right: Value) -> bool:
    """``left < right``."""
    _guard_containers(context, left, right)
    return bool(left < right)


def less_equal(context: EvalContext, left: Value, right: Value) -> bool:
    """``left <= right``."""
    _guard_containers(context, left, right)
    return bool(left <= right)


def greater(context: EvalContext, left: Value, right: Value) -> bool:
    """``left > right``."""
    _guard_containers(context, left, right)
    return bool(left > right)


def greater_equal(context: EvalContext, left: Value, right: Value) -> bool:
    """``left >= right``."""
    _guard_containers(context, left, right)
    return bool(left >= right)


def contains(context: EvalContext, left: Value, right: Value) -> bool:
    """``left in right`` for a string, list or dict ``right``."""
    if isinstance(right, str):
        if not isinstance(left, str):
            raise EvaluationError(
                f"'in <string>' requires string as left operand, not {type_name(left)}"
            )
        charge_text_search(context, len(right), len(left))
        return left in right
    if isinstance(right, dict):
        if not isinstance(left, str):
            return False
        charge_key(context, left)
        return left in right
    if isinstance(right, list):
        charge_search(context, left, right)
        return left in right
    raise EvaluationError(f"argument of type '{type_name(right)}' is not a container")


def not_contains(context: EvalContext, left: Value, right: Value) -> bool:
    """``left not in right``."""
    return not contains(context, left, right)


def identical(context: EvalContext, left: Value, right: Value) -> bool:
    """``left is right``."""
    return left is right


def not_identical(context: EvalContext, left: Value, right: Value) -> bool:
    """``left is not right``."""
    return left is not right


COMPARE_OPERATORS: Final[Mapping[type[ast.cmpop], CompareOp]] = {
    ast.Eq: equal,
    ast.NotEq: not_equal,
    ast.Lt: less,
    ast.LtE: less_equal,
    ast.Gt: greater,
    ast.GtE: greater_equal,
    ast.In: contains,
    ast.NotIn: not_contains,
    ast.Is: identical,
    ast.IsNot: not_identical,
}
"""Allowed comparison operators by AST operator type."""
