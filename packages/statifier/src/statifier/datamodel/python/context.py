"""Per-evaluation state: the variables, the ``In`` callback and the remaining work budget."""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType
from typing import Final

from statifier.datamodel.python.errors import EvaluationError
from statifier.datamodel.python.limits import STEP_BUDGET
from statifier.datamodel.python.values import InState, Value, Variables

NO_SLOTS: Final[list[Value]] = []
"""Shared empty slot list for expressions without comprehensions (never written to)."""


class EvalContext:
    """Mutable state of one evaluation (or of one whole script run).

    ``slots`` holds the current values of comprehension variables; the compiler assigns each
    comprehension variable a fixed slot so lookups need no dictionary.
    """

    __slots__ = ("in_state", "slots", "steps", "variables")

    variables: Variables
    in_state: InState
    steps: int
    slots: list[Value]

    def __init__(self, variables: Variables, in_state: InState, slot_count: int) -> None:
        self.variables = variables
        self.in_state = in_state
        self.steps = STEP_BUDGET
        self.slots = [None] * slot_count if slot_count else NO_SLOTS

    def charge(self, units: int) -> None:
        """Spend ``units`` of the work budget, failing once it is exhausted."""
        self.steps -= units
        if self.steps < 0:
            raise budget_exceeded()


Evaluator = Callable[[EvalContext], Value]
"""A compiled expression node: evaluates it within a context."""


def budget_exceeded() -> EvaluationError:
    """Return the error reported when an evaluation runs out of work budget."""
    return EvaluationError("evaluation is too expensive: step budget exceeded")


CONTEXT_POOL: Final[list[EvalContext]] = []
"""Released contexts available for reuse.

Creating an object costs more than evaluating a typical condition, so the hot path reuses
contexts. ``list.pop`` and ``list.append`` are atomic, which makes the pool safe to share
between threads.
"""

CONTEXT_POOL_LIMIT: Final = 64
"""Most contexts kept in :data:`CONTEXT_POOL`."""

NO_VARIABLES: Final[Variables] = MappingProxyType({})
"""Empty variables, stored in pooled contexts so they keep no caller data alive."""


def _in_no_state(state_id: str) -> bool:
    return False


NO_STATES: Final[InState] = _in_no_state
"""An ``In`` callback that knows no state, stored in pooled contexts so that they keep no
caller (and through a bound method, no interpreter run) alive."""
