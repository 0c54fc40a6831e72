"""Invocation answers: delivered only while the invocation is live (SCXML 6.4)."""

from __future__ import annotations

from dataclasses import dataclass

from statifier.core.events import Event
from statifier.core.state import MachineState

from ._records import Decline

NOT_LIVE = "invocation_not_live"
"""The reason an answer of an invocation that is no longer live is declined."""

SUPERSEDED = "invocation_superseded"
"""The reason an answer of an earlier generation of a live invoke id is declined."""


@dataclass(frozen=True, slots=True)
class LiveAnswer:
    """An ``EventBuilder`` stepping ``answer`` only while its invocation is live; see
    :func:`live_answer`."""

    answer: Event
    generation: int | None = None

    def __call__(self, state: MachineState) -> Event | Decline:
        """The answer, or ``Decline(NOT_LIVE)`` when no live invocation has its invoke id
        (``Executions.step`` then checks the generation, see :func:`live_answer`)."""
        invoke_id = self.answer.invokeid
        if invoke_id is None or invoke_id not in state.invocations.values():
            return Decline(NOT_LIVE)
        return self.answer


def live_answer(answer: Event, *, generation: int | None = None) -> LiveAnswer:
    """A builder stepping ``answer`` (``planner.invocation_done``/``invocation_failed``,
    whose ``invokeid`` names the invocation) only if that invocation is live in the
    locked position; otherwise the step answers ``Declined(reason="invocation_not_live")``.

    A cancelled invocation's late answer, or one for an invocation whose state was left,
    is thereby never delivered, checked in the same transaction that would apply it.
    ``generation`` is the macrostep that started the answering invocation: an invoking
    state left and entered again has a live invocation of the same invoke id, another
    one, and the answer of the earlier one is declined (``invocation_superseded``). The
    step asks the executor (a ``FanOutExecutor``'s ``superseded``) in its transaction,
    after the execution's row is locked, so no re-entry can slip in between.
    """
    return LiveAnswer(answer, generation)
