"""The spans of ``Executions``' calls (ADR 30), taken only when tracing is on.

Each public call that drives an execution reads ``statifier.instrumentation.current``
once; when it is not None the call runs inside :func:`traced`, which opens the span,
awaits the call's own work and says how it ended from the answer (the row's chart,
revision, status and step count, the active states, the outcome). Nothing of an event's
data or of the datamodel is handed over: the event's name is.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from statifier.core.events import Event
from statifier.core.state import MachineState
from statifier.instrumentation import Instrumentation

from ._answers import LiveAnswer
from ._records import AlreadyApplied, Declined, Discarded, Execution, Stepped


async def traced[R](tracer: Instrumentation, operation: str, work: Awaitable[R], **facts: Any) -> R:
    """Await ``work`` inside a span of ``operation``, then add what its answer says."""
    with tracer.span(operation, **facts) as span:
        result = await work
        span.set(**answer_facts(result))
    return result


def event_name(event: object) -> str | None:
    """The name of the event a step drives, when it is known before the row is locked."""
    if isinstance(event, Event):
        return event.name
    if isinstance(event, LiveAnswer):
        return event.answer.name
    return None


def answer_facts(result: object) -> dict[str, Any]:
    """The facts of a call's answer: the row it left and how the call ended."""
    execution = getattr(result, "execution", None)
    facts: dict[str, Any] = row_facts(execution) if isinstance(execution, Execution) else {}
    match result:
        case Stepped(state=state):
            facts["outcome"] = "stepped"
            facts["states"] = state.active_leaf_ids()
        case AlreadyApplied():
            facts["outcome"] = "already_applied"
        case Discarded(status=status):
            facts["outcome"] = "discarded"
            facts["reason"] = status
        case Declined(reason=reason):
            facts["outcome"] = "declined"
            facts["reason"] = reason
        case _:
            moved = getattr(result, "state", None)  # a migration's imported position
            if isinstance(moved, MachineState):
                facts["outcome"] = "dry_run" if getattr(result, "dry_run", False) else "migrated"
                facts["states"] = moved.active_leaf_ids()
    return facts


def row_facts(execution: Execution) -> dict[str, Any]:
    """The facts of an execution's row."""
    return {
        "execution_id": execution.id,
        "chart": execution.chart_name,
        "revision": execution.chart_identity,
        "status": execution.status,
        "step_count": execution.step_count,
    }
