"""Compiled objects that fail when used: what an unparsable source compiles to in a datamodel
that reports syntax errors at run time (``Datamodel.syntax_errors_at_runtime``)."""

from __future__ import annotations

from dataclasses import dataclass

from statifier.budget import Budget
from statifier.datamodel.base import (
    Admit,
    Environment,
    EvaluationError,
    InState,
    ScriptError,
    Value,
    Variables,
    Writable,
    WriteResult,
)


@dataclass(frozen=True, slots=True)
class FailingExpression:
    """An expression that raises :class:`EvaluationError` with ``reason`` when evaluated."""

    source: str
    reason: str

    def evaluate(
        self, variables: Variables, in_state: InState, budget: Budget | None = None
    ) -> Value:
        """Always raise: the source did not compile."""
        raise EvaluationError(self.reason)


@dataclass(frozen=True, slots=True)
class FailingLocation:
    """A location whose writes raise :class:`EvaluationError` with ``reason``."""

    source: str
    reason: str
    root: str = ""

    @property
    def plain(self) -> bool:
        """Never: every write fails."""
        return False

    def write(
        self, variables: Variables, value: Value, in_state: InState, budget: Budget | None = None
    ) -> WriteResult:
        """Always raise: the source did not compile."""
        raise EvaluationError(self.reason)


@dataclass(frozen=True, slots=True)
class FailingScript:
    """A script whose runs raise :class:`ScriptError` with ``reason`` and change nothing."""

    source: str
    reason: str

    def run(
        self,
        env: Environment,
        in_state: InState,
        writable: Writable,
        budget: Budget | None = None,
        admit: Admit | None = None,
    ) -> list[WriteResult]:
        """Always raise: the source did not compile."""
        raise ScriptError(self.reason, [], 0)
