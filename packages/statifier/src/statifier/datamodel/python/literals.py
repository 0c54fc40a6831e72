"""Compile-time knowledge of literal values, used to specialise hot closures."""

from __future__ import annotations

import ast
from typing import Final

from statifier.datamodel.python.context import EvalContext, Evaluator
from statifier.datamodel.python.values import Value

NOT_LITERAL: Final = object()
"""Returned by :func:`literal_value` for nodes that are not scalar literals."""


_SCALARS: Final = (str, int, float)
_NUMBERS: Final = (int, float)
_SIGNS: Final = (ast.USub, ast.UAdd)


def literal_value(node: ast.expr) -> Value:
    """Return the scalar value of a literal (a signed number included), else NOT_LITERAL."""
    # Tuples, not unions, in isinstance: this runs for both sides of every comparison.
    if isinstance(node, ast.Constant):
        value = node.value
        if value is None or isinstance(value, _SCALARS):
            return value
        return NOT_LITERAL
    if isinstance(node, ast.UnaryOp):
        operand = node.operand
        op = node.op
        if (
            isinstance(op, _SIGNS)
            and isinstance(operand, ast.Constant)
            and isinstance(operand.value, _NUMBERS)
            and not isinstance(operand.value, bool)
        ):
            number = operand.value
            return -number if isinstance(op, ast.USub) else number
    return NOT_LITERAL


def constant(value: Value) -> Evaluator:
    """Return an evaluator that always yields ``value``."""

    def evaluate_constant(context: EvalContext) -> Value:
        return value

    return evaluate_constant


NONE: Final[Evaluator] = constant(None)
"""Evaluator of ``None``, used for omitted slice bounds."""
