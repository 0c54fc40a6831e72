"""Deliveries: how a fired timer (or an invocation's answer) reaches its execution.

A delivery must establish liveness *before* feeding anything back: an execution that
terminated or halted gets the event discarded (SCXML 6.2), recorded as a cancelled job
with a reason. An environment failure (store unreachable) must raise, so the job retries
with backoff; a delivery may answer ``Snoozed(seconds)`` to ask again later without
spending an attempt. Implementations must be idempotent under redelivery.

The defaults deliver into live ``statifier.runtime.session.Session``s through the process
registry: step 1, look the scope up (absent: discard as ``terminated``); step 2, ask the
session's status (anything but ``running`` or ``budget_exhausted`` is discarded with
that status). A process-less host supplies its own delivery.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from statifier.core.effects import SendDelayed
from statifier.runtime import registry
from statifier.runtime.session import Session


@dataclass(frozen=True, slots=True)
class Delivered:
    """The event was handed to a live execution."""


@dataclass(frozen=True, slots=True)
class Discarded:
    """The execution is not live; the event is dropped for good (``reason`` says why)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Snoozed:
    """Ask again ``seconds`` (a positive integer) from now, without spending an attempt."""

    seconds: int


DeliveryAnswer = Delivered | Discarded | Snoozed
"""What a delivery tells the timer job: done, dropped with a reason, or try again later."""

DELIVERED = Delivered()


@runtime_checkable
class TimerDelivery(Protocol):
    """Feeds a fired timer back into its execution."""

    def deliver(
        self, scope: str, effect: SendDelayed
    ) -> DeliveryAnswer | Awaitable[DeliveryAnswer]:
        """Liveness first, then deliver; answer Delivered, Discarded(reason) or Snoozed(s)."""


@runtime_checkable
class InvokeDelivery(Protocol):
    """Feeds an invocation's answer back into its execution (liveness first).

    A host answering a deferred invocation from elsewhere calls its own delivery with
    the same scope and invoke id; the answer then behaves exactly as from the worker.
    """

    def deliver(
        self, scope: str, invoke_id: str, data: Any, caller_context: Any = None
    ) -> DeliveryAnswer | Awaitable[DeliveryAnswer]:
        """Deliver ``done.invoke.<invoke_id>`` with ``data``."""

    def deliver_failure(
        self,
        scope: str,
        invoke_id: str,
        reason: str,
        attempts: int,
        detail: str,
        caller_context: Any = None,
    ) -> DeliveryAnswer | Awaitable[DeliveryAnswer]:
        """Deliver ``error.communication.invoke.<invoke_id>`` with reason/attempts/detail."""


LIVE_STATUSES = frozenset({"running", "budget_exhausted"})
"""Statuses that count as live; budget-exhausted executions are still cancellable."""


def live_session(scope: str) -> Session | Discarded:
    """The two-step liveness check: registered, then running (or budget exhausted)."""
    session = registry.lookup(scope)
    if session is None:
        return Discarded("terminated")
    status = session.status().status
    if status not in LIVE_STATUSES:
        return Discarded(status)
    return session


class SessionDelivery:
    """The default timer delivery: into the live session registered under the scope."""

    def deliver(self, scope: str, effect: SendDelayed) -> DeliveryAnswer:
        """Discard unless the session is live; otherwise the session fires the send itself.

        The session delivers it as it delivers a send its own timer fired (through the
        engine's planner), so the event is the same whichever clock kept the delay.
        """
        session = live_session(scope)
        if isinstance(session, Discarded):
            return session
        session.fire_delayed(effect)
        return DELIVERED


class SessionInvokeDelivery:
    """The default invocation delivery: answers go to the live session under the scope."""

    def deliver(
        self, scope: str, invoke_id: str, data: Any, caller_context: Any = None
    ) -> DeliveryAnswer:
        """``done.invoke.<id>`` with ``data`` (the session drops it if the invocation ended)."""
        session = live_session(scope)
        if isinstance(session, Discarded):
            return session
        session.done_invocation(invoke_id, data)
        return DELIVERED

    def deliver_failure(
        self,
        scope: str,
        invoke_id: str,
        reason: str,
        attempts: int,
        detail: str,
        caller_context: Any = None,
    ) -> DeliveryAnswer:
        """``error.communication.invoke.<id>`` with ``{reason, attempts, detail}``."""
        session = live_session(scope)
        if isinstance(session, Discarded):
            return session
        session.failed_invocation(
            invoke_id, {"reason": reason, "attempts": attempts, "detail": detail}
        )
        return DELIVERED
