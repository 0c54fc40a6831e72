"""Exception hierarchy of the datamodel (shared by every datamodel, see ``datamodel.base``).

Every failure the datamodel reports is a :class:`DatamodelError`; compile-time problems are
:class:`ExpressionSyntaxError` and run-time problems are :class:`EvaluationError`.
"""

from __future__ import annotations

from statifier.datamodel.base import (
    DatamodelError,
    EvaluationError,
    ExpressionSyntaxError,
    ScriptError,
)
from statifier.values import brief

__all__ = [
    "DatamodelError",
    "EvaluationError",
    "ExpressionSyntaxError",
    "ScriptError",
    "evaluation_error",
]


def evaluation_error(exc: Exception) -> EvaluationError:
    """Translate an unexpected Python exception raised while evaluating into an error."""
    if isinstance(exc, RecursionError):
        return EvaluationError("value or expression is too deeply nested to evaluate")
    if isinstance(exc, MemoryError):
        return EvaluationError("out of memory while evaluating")
    if isinstance(exc, KeyError):
        key = exc.args[0] if exc.args else None
        return EvaluationError(f"key {brief(key)} not found")
    if isinstance(exc, OverflowError):
        return EvaluationError(f"numeric overflow: {exc}")
    reason = str(exc)
    if len(reason) > _REASON_LENGTH:
        reason = reason[:_REASON_LENGTH] + "..."
    return EvaluationError(reason if reason else type(exc).__name__)


_REASON_LENGTH = 300
"""Longest reason kept from a Python exception's message (messages stay short)."""
