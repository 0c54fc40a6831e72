"""Compile-time knowledge of literal values, used to specialise hot closures."""

from __future__ import annotations

import ast
from typing import Final

from statifier.datamodel.python.context import EvalContext, Evaluator
from statifier.datamodel.python.values import Value

NOT_LITERAL: Final = object()
"""Returned by :func:`literal_value` for nodes that are not scalar literals."""


def literal_value(node: ast.expr) -> Value:
    """Return the scalar value of a literal (a signed number included), else NOT_LITERAL."""
    if isinstance(node, ast.Constant) and (
        node.value is None or isinstance(node.value, str | int | float)
    ):
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub | ast.UAdd)
        and isinstance(node.operand, ast.Constant)
        and isinstance(node.operand.value, int | float)
        and not isinstance(node.operand.value, bool)
    ):
        number = node.operand.value
        return -number if isinstance(node.op, ast.USub) else number
    return NOT_LITERAL


def constant(value: Value) -> Evaluator:
    """Return an evaluator that always yields ``value``."""

    def evaluate_constant(context: EvalContext) -> Value:
        return value

    return evaluate_constant


NONE: Final[Evaluator] = constant(None)
"""Evaluator of ``None``, used for omitted slice bounds."""
