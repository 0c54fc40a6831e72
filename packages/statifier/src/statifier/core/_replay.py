"""Whole macrosteps replayed from a memo, for steps that only move the configuration.

A macrostep that evaluates no condition, runs no executable content, records or follows
no history, enters no final state, starts or finalizes no invocation and handles no
internal event (in short: unguarded, content-free transitions, eventless ones included)
depends on nothing but the configuration and the event's name. From the same
configuration the same event name always ends in the same configuration, with the same
``microstep`` and ``round`` counters, the same states entered on the way and no effect;
the datamodel changes only in ``_event``.

The first such macrostep is run in full (``algorithm.Interpreter``) and remembered per
machine (``record``); the next ones are rebuilt from the memo (``replay``) into exactly
the state the full run returns. A replay still honours the execution's budgets: the
rounds the step takes must fit its round budget and their node costs its step budget,
otherwise the full run decides. ``tests`` compare both paths on every chart they drive.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any, Final

from statifier.budget import NODE_COST
from statifier.core._memo import room
from statifier.core._run import Keep
from statifier.core.events import Event
from statifier.core.state import MachineState, StateBuilder, finish

STEPS: Final = "steps"
"""The key of the step memo in a machine's ``_cache``."""

_LIMIT: Final = 2048
"""Remembered steps per machine before the memo is reset (event names come from outside)."""

_NOTHING: Final[frozenset[int]] = frozenset()

_NAME_LENGTH: Final = 256
"""Steps on longer event names are not remembered."""

Step = tuple[frozenset[int], int, int, frozenset[int]]
"""A remembered step: the configuration it ends in, its ``microstep`` and ``round``
counters, and every state it enters (eventless hops included)."""


def replay(
    state: MachineState, event: Event, routes: Container[str] | Keep | None
) -> MachineState | None:
    """The state ``handle_event(state, event)`` returns (with no effect) if the step is in
    the memo and fits the execution's budgets; None to run it in full."""
    if state.trace or state.internal_queue or state.invocations:
        return None
    memo: dict[tuple[frozenset[int], str], Step] | None = state.machine._cache.get(STEPS)
    if memo is None:
        return None
    step = memo.get((state.configuration, event.name))
    if step is None:
        return None
    configuration, microstep, rounds, entered = step
    max_rounds = state.max_macrostep_rounds
    if (max_rounds is not None and max_rounds < rounds) or (
        state.limits.start_steps < rounds * NODE_COST
    ):
        return None
    datamodel = dict(state.datamodel)  # a dict: see ``record``
    datamodel["_event"] = event.as_system_variable()
    new: Any = StateBuilder()
    new.machine = state.machine
    new.session_id = state.session_id
    new.configuration = configuration
    new.internal_queue = ()
    new.history = state.history
    new.entered = state.entered if entered <= state.entered else state.entered | entered
    new.states_to_invoke = state.states_to_invoke
    new.invocations = state.invocations
    new.invoke_counter = state.invoke_counter
    new.send_counter = state.send_counter
    new.timer_counter = state.timer_counter
    new.caller_context = event.caller_context
    new.datamodel = datamodel
    new.running = True
    new.status = "running"
    new.macrostep = state.macrostep + 1
    new.microstep = microstep
    new.round = rounds
    new.trace = False
    new.max_macrostep_rounds = max_rounds
    new.invoke_types = state.invoke_types
    new.routes = state.routes if isinstance(routes, Keep) else routes
    new.limits = state.limits
    # Only _event changed, and system variables are not counted: the size bound holds.
    bound = state._datamodel_bound
    new._datamodel_bound = (
        (datamodel, bound[1]) if bound is not None and bound[0] is state.datamodel else None
    )
    return finish(new)


def record(before: MachineState, name: str, after: MachineState, entered: frozenset[int]) -> None:
    """Remember the step from ``before`` on event ``name`` that ended in ``after``, having
    entered ``entered`` on the way (the caller checked it only moved the configuration).

    Only for variables kept in a ``dict``: a datamodel that keeps its own (ADR 22) may
    hold what a variable took of the event, which the next event must turn into data of
    its own (its engine sees every event), so its steps always run in full."""
    if len(name) > _NAME_LENGTH or type(after.datamodel) is not dict:
        return
    cache = before.machine._cache
    memo = cache.get(STEPS)
    configuration = after.configuration
    size = len(before.configuration) + len(configuration) + len(entered)
    if memo is None or len(memo) >= room(_LIMIT, size):
        memo = cache[STEPS] = {}
    if configuration == before.configuration:
        configuration = before.configuration  # one set per configuration, not per step
    memo[(before.configuration, name)] = (
        configuration,
        after.microstep,
        after.round,
        entered or _NOTHING,
    )
