"""The two seams a step performs effects through.

``EffectExecutor`` performs every effect that has a durable form, inside the step's own
transaction (``conn``): a delayed send to the execution itself becomes a timer, a
``<cancel>`` cancels timers, an ``<invoke>`` starts an invocation, leaving its state stops
it. ``statifier_oban`` ships the executor that makes these oban jobs. An executor raises
``EffectRefused`` for an effect it has no durable form for (the chart hears
``error.communication``); any other exception is a failed durable write, and the step
rolls back and raises it.

An executor may also implement ``TimerBatches``: a step then checks each timer when the
chart arms it and stores them later, together (ADR 32).

An executor that is also a ``PostExecutor`` makes BasicHTTP sends (``<send
type="basichttp">``, SCXML C.2) as durable work too: without one, each is refused with
``error.communication``.

``HostHook`` gets what has no durable form here: sends addressed to other sessions
(``#_parent``, ``#_scxml_<id>``), and ``<log>``s and chart errors to report.
``LoggingHost`` is the default: it reaches no other session, and logs.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Container, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from psycopg import AsyncConnection
from statifier.core.effects import Cancel, CancelInvoke, ErrorRaised, Invoke, Log, SendDelayed
from statifier.core.events import Event
from statifier.core.planner import Deliver, Post
from statifier.values import BRIEF_LENGTH, brief

from ._records import Execution

logger = logging.getLogger("statifier_persistence")


@runtime_checkable
class EffectExecutor(Protocol):
    """Performs durable effects in the step's transaction; the scope is the execution id."""

    @property
    def invoke_types(self) -> Iterable[str] | None:
        """The ``<invoke type>`` values this executor starts (None: built-ins only)."""

    async def schedule(
        self, conn: AsyncConnection[Any], execution_id: str, effect: SendDelayed
    ) -> None:
        """Store a timer for a delayed send to the execution itself.

        When it fires, the event to step is ``statifier.core.planner.fire(execution_id,
        effect)``'s. ``effect.target`` addresses the execution (None, or its own
        ``#_scxml_`` address). Must be idempotent on ``(execution_id, effect.ordinal)``.
        """

    async def cancel_timers(
        self, conn: AsyncConnection[Any], execution_id: str, effect: Cancel
    ) -> None:
        """Cancel every pending timer of the execution under ``effect.send_id``."""

    async def start_invocation(
        self, conn: AsyncConnection[Any], execution_id: str, effect: Invoke
    ) -> None:
        """Start an invocation; its answer comes back as a step.

        The answer is ``planner.invocation_done``/``invocation_failed`` for
        ``effect.invoke_id``, stepped only while the invocation is live (SCXML 6.4).
        """

    async def stop_invocation(
        self, conn: AsyncConnection[Any], execution_id: str, effect: CancelInvoke
    ) -> None:
        """Stop a live invocation: its pending work is cancelled, its answer discarded."""

    async def forward(
        self, conn: AsyncConnection[Any], execution_id: str, invoke_id: str, event: Event
    ) -> bool:
        """Hand ``event`` to live invocation ``invoke_id`` (a ``<send>`` to ``#_<id>``, or
        autoforward); False when the invocation takes no events."""


@runtime_checkable
class EarlierTimers(Protocol):
    """What an ``EffectExecutor`` implements besides when its timers stay keyed by
    ``(execution_id, ordinal)`` for as long as they are stored, whatever their state.

    A new execution's ordinals start at 1 again, so one created under the id of an earlier
    execution whose timers remain would share their keys: its timers merged with the old
    ones (never stored), the old pending ones firing into it. ``create`` asks first and
    refuses the id (``ExecutionIdNotFree``) while any remain.
    """

    async def earlier_timers(self, conn: AsyncConnection[Any], execution_id: str) -> bool:
        """Whether any timer stored under ``execution_id`` remains, in the transaction of
        ``conn`` (the new execution's row is written already, its timers not yet)."""


@runtime_checkable
class TimerBatches(Protocol):
    """What an ``EffectExecutor`` implements besides to store timers in batches (ADR 32).

    A step then asks ``prepare_timer`` when the chart arms a delayed send (a refusal is
    decided there, and heard by the chart as with ``schedule``) and ``store_timers`` once
    for every timer it prepared, right before it stores the execution, or before any
    other call on the executor or the host in between; a group commit stores the timers
    of several executions with one call. ``schedule`` is still used by an executor's
    other callers.
    """

    @property
    def timer_batches(self) -> bool:
        """Whether steps use ``prepare_timer`` and ``store_timers`` (False: ``schedule``,
        e.g. for a subclass that overrides ``schedule``); asked when each step begins its
        drive."""

    def prepare_timer(self, execution_id: str, effect: SendDelayed) -> Any:
        """Check and encode a timer as ``schedule`` would, storing nothing; raises
        ``EffectRefused`` for what ``schedule`` refuses. The answer is for
        ``store_timers`` only; it is asked in the step's own context (its tracing span),
        ``store_timers`` maybe in another step's (a group commit)."""

    async def store_timers(
        self, conn: AsyncConnection[Any], timers: Sequence[Any]
    ) -> TimersSent | None:
        """Store prepared timers (of one execution or several) in the transaction of
        ``conn``, idempotent on ``(execution_id, ordinal)``. It may send them without
        waiting for an answer (a connection in pipeline mode): a failure then raises at
        the latest when the transaction commits, and rolls it back.

        An answer other than None has something to read back (the jobs' ids, for tracing):
        the caller awaits it once the transaction's other statements are sent, so that
        one round trip answers them all, with None, or with the exception that stopped
        the transaction first (it then reads nothing and only ends what it began)."""


TimersSent = Callable[[BaseException | None], Awaitable[None]]
"""What ``TimerBatches.store_timers`` answers when it has rows to read back later."""


@runtime_checkable
class PostExecutor(Protocol):
    """What an ``EffectExecutor`` implements besides to make BasicHTTP sends
    (``statifier_oban``'s does, given an allow-list). The call comes inside the step's
    transaction (``conn``): what it stores commits or rolls back with the step, and it may
    not step an execution itself."""

    async def post(self, conn: AsyncConnection[Any], execution_id: str, post: Post) -> None:
        """Store the durable work that POSTs ``post`` (``statifier.basichttp.outbound``
        writes the message), run at least once after the step commits. Its final failure
        must reach the chart through ``Executions.send_failed`` (``planner.post_failed``),
        keyed so that it applies once. ``EffectRefused``: the host does not make this POST
        (its allow-list), and the chart hears ``error.communication`` at once."""


@runtime_checkable
class HostHook(Protocol):
    """What a step does with effects that have no durable form in this package."""

    def routes(self, execution: Execution) -> Container[str]:
        """Send targets the host reaches besides the execution and its invocations.

        A ``<send>`` to any other target raises ``error.communication`` in the chart at
        once (SCXML 6.2), before ``deliver`` is ever asked.
        """

    async def deliver(
        self, conn: AsyncConnection[Any], execution: Execution, instruction: Deliver
    ) -> bool:
        """Deliver an immediate send to a target in ``routes`` (in the step's transaction).

        False: unreachable after all; the chart gets ``error.communication``.
        """

    def report(self, execution: Execution, effect: Log | ErrorRaised) -> None:
        """Make a ``<log>`` or a chart error visible; called after the step committed."""


class LoggingHost:
    """The default host: it reaches no other session, and logs ``<log>``s and errors.

    Logs go to the ``statifier_persistence`` logger: ``<log>`` at INFO, chart errors at
    WARNING (a chart that handles its own errors still shows them to an operator).
    """

    def routes(self, execution: Execution) -> Container[str]:
        """No target besides the execution itself and its invocations."""
        return frozenset()

    async def deliver(
        self, conn: AsyncConnection[Any], execution: Execution, instruction: Deliver
    ) -> bool:
        """Never called with the empty routes above; refuses if it is."""
        return False

    def report(self, execution: Execution, effect: Log | ErrorRaised) -> None:
        """Log the effect, naming the execution."""
        # The chart controls labels, values and messages: a line shows their start only.
        if isinstance(effect, Log):
            logger.info(
                "%s [log] %s: %s",
                execution.id,
                _cut(effect.label),
                brief(effect.value),
                extra={"execution_id": execution.id, "chart": execution.chart_name},
            )
        else:
            logger.warning(
                "%s [%s] %s (line %s)",
                execution.id,
                effect.name,
                _cut(effect.message or "(no message)"),
                effect.line,
                extra={
                    "execution_id": execution.id,
                    "chart": execution.chart_name,
                    "event": effect.name,
                    "line": effect.line,
                },
            )


def _cut(text: str | None) -> str | None:
    """``text``, cut to ``BRIEF_LENGTH`` characters (marked by ``...``)."""
    if text is None or len(text) <= BRIEF_LENGTH:
        return text
    return text[:BRIEF_LENGTH] + "..."
