"""What a call into the engine costs the macrostep's budget (ADR 11)."""

from __future__ import annotations

from time import perf_counter_ns
from typing import TYPE_CHECKING, Final

from statifier.datamodel.base import EvaluationError

if TYPE_CHECKING:
    from statifier.budget import Budget

CALL_COST: Final = 1_000
"""Steps of the macrostep budget (ADR 11) one call into the engine costs, at least.

The engine bounds each call by CPU time, which is not deterministic, so a call is charged
a fixed amount: replays exhaust the budget at the same call. Only a call that runs longer
than ``CALL_COST`` steps' worth of time (``STEPS_PER_SECOND``: 0.5 ms, a hundred times an
ordinary call) is charged for its time too, or a macrostep of such calls (an eventless loop
whose condition spins) could run its 10,000 calls at a full second each.
"""

STEPS_PER_SECOND: Final = 2_000_000
"""What a second of running chart code costs: the default budget buys about 5 s of it."""

NO_LIMIT: Final = 2**53 - 1
"""Stands in for "unbounded" in the engine (the largest integer a double holds exactly)."""

NS_PER_STEP: Final = 1_000_000_000 // STEPS_PER_SECOND
"""Nanoseconds of running chart code one step of the budget stands for."""


def charge(budget: Budget | None) -> int:
    """Charge a call's fixed cost; return when it starts (0 without a budget).

    Raises ``EvaluationError`` when the macrostep's steps budget is exhausted."""
    if budget is None:
        return 0
    budget.spend(CALL_COST)
    if budget.steps < 0:
        raise EvaluationError("the macrostep's steps budget is exhausted")
    return perf_counter_ns()


def charge_time(budget: Budget | None, started: int) -> None:
    """Charge what a call that ran longer than its fixed cost's worth spent beyond it."""
    if budget is not None:
        beyond = (perf_counter_ns() - started) // NS_PER_STEP - CALL_COST
        if beyond > 0:
            budget.spend(beyond)


def charge_calls(budget: Budget, started: int, ran: int) -> None:
    """Charge one call into the engine that ran ``ran`` steps (conditions, writes) each
    charged as its own call would be: ``CALL_COST`` each, or the time since ``started``
    when that is more."""
    spent = (perf_counter_ns() - started) // NS_PER_STEP
    least = CALL_COST * ran
    # ``budget.spend``, inlined.
    steps = budget.steps = budget.steps - (spent if spent > least else least)
    if steps < 0 and budget.exhausted is None:
        budget.exhausted = "steps"


def output_limit(budget: Budget | None) -> int:
    """How large a value a call may hand out: what remains of the output budget."""
    return NO_LIMIT if budget is None else max(budget.output, 0)
