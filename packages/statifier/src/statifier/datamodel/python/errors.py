"""Exception hierarchy of the datamodel.

Every failure the datamodel reports is a :class:`DatamodelError`; compile-time problems are
:class:`ExpressionSyntaxError` and run-time problems are :class:`EvaluationError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from statifier.errors import StatifierError
from statifier.values import brief

if TYPE_CHECKING:
    from statifier.datamodel.python.locations import WriteResult


class DatamodelError(StatifierError):
    """Base class of every error raised by the datamodel."""


class ExpressionSyntaxError(DatamodelError):
    """An expression, location or script was rejected at compile time.

    ``line`` is 1-based and ``column`` is 0-based; both point into ``source`` as given by the
    caller (not into any normalised copy of it).
    """

    message: str
    source: str
    line: int
    column: int

    def __init__(self, message: str, source: str, line: int = 1, column: int = 0) -> None:
        super().__init__(f"{message} (line {line}, column {column})")
        self.message = message
        self.source = source
        self.line = line
        self.column = column


class EvaluationError(DatamodelError):
    """Evaluating an expression, writing a location or running a script failed.

    ``str(error)`` is a human-readable reason.
    """


class ScriptError(EvaluationError):
    """A script failed part-way through.

    Writes performed by earlier statements stay applied to the environment; they are listed in
    ``writes`` in execution order. ``line`` is the 1-based line of the failing statement.
    """

    writes: list[WriteResult]
    line: int

    def __init__(self, message: str, writes: list[WriteResult], line: int) -> None:
        super().__init__(message)
        self.writes = writes
        self.line = line


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
