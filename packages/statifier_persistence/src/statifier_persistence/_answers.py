"""Invocation answers: delivered only while the invocation is live (SCXML 6.4)."""

from __future__ import annotations

from statifier.core.events import Event
from statifier.core.state import MachineState

from ._executions import EventBuilder
from ._records import Decline

NOT_LIVE = "invocation_not_live"
"""The reason an answer of an invocation that is no longer live is declined."""


def live_answer(answer: Event) -> EventBuilder:
    """A builder stepping ``answer`` (``planner.invocation_done``/``invocation_failed``,
    whose ``invokeid`` names the invocation) only if that invocation is live in the
    locked position; otherwise the step answers ``Declined(reason="invocation_not_live")``.

    A cancelled invocation's late answer, or one for an invocation whose state was left,
    is thereby never delivered, checked in the same transaction that would apply it.
    """
    invoke_id = answer.invokeid

    def build(state: MachineState) -> Event | Decline:
        if invoke_id is None or invoke_id not in state.invocations.values():
            return Decline(NOT_LIVE)
        return answer

    return build
