"""The seam tracing hangs on: spans around the work a host wants to follow (ADR 30).

statifier imports no tracing library. A path worth a span (a live session's macrostep, a
durable execution's step, a timer or an invocation job) reads :data:`current` and, when
it is None, does nothing else: one module attribute read is the whole cost of tracing
that is off. ``statifier_oban.otel.instrument()`` installs the OpenTelemetry
implementation; a test may install one of its own.

A span is one of the :data:`OPERATIONS` and says what happened through named facts
(:data:`FACTS`), never through event data, datamodel values or parameters: those are the
chart's and its callers' and never leave the engine this way. An implementation maps each
fact to its attribute, clips texts and bounds lists (see ``statifier_oban.otel``).

Three hooks for hosts that do not trace themselves:

* :func:`continued` makes a caller's W3C trace context (an HTTP request's ``traceparent``
  and ``tracestate`` headers, a command line's ``--traceparent``) the parent of the spans
  started inside it: an event sent through an API continues the caller's trace.
* :func:`carrier` is the context to store with work that runs later (a job's meta):
  ``statifier_oban`` stores it on every timer and invocation job it inserts.
* :func:`log_ids` is the current trace and span id, for log lines.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Final, Protocol

__all__ = [
    "FACTS",
    "NO_PARENT",
    "OPERATIONS",
    "Instrumentation",
    "Span",
    "carrier",
    "continued",
    "current",
    "install",
    "installed",
    "log_ids",
]

CREATE: Final = "Create"
"""A durable execution created (its initial drive)."""
STEP: Final = "Step"
"""An event stepped into a durable execution."""
FIRE: Final = "Fire"
"""A durable execution's delayed send fired into it."""
CANCEL: Final = "Cancel"
"""A durable execution's cancel."""
MIGRATE: Final = "Migrate"
"""A durable execution moved to another chart revision."""
MACROSTEP: Final = "Macrostep"
"""One macrostep of a live session (its first one included)."""
SCHEDULE_TIMER: Final = "ScheduleTimer"
"""A timer job stored."""
SCHEDULE_TIMERS: Final = "ScheduleTimers"
"""A batch of timer jobs stored in one statement."""
FIRE_TIMER: Final = "FireTimer"
"""A timer job run: its delivery fired (or discarded, or snoozed) the timer."""
CANCEL_TIMER: Final = "CancelTimer"
"""A ``<cancel>``: the pending timer jobs of a send id cancelled."""
START_INVOKE: Final = "StartInvoke"
"""An invocation job stored."""
RUN_INVOKE: Final = "RunInvoke"
"""An invocation job run: its handler, then its answer."""
ANSWER_INVOKE: Final = "AnswerInvoke"
"""An invocation's answer (done or failed) handed to its delivery."""
START_CHILD: Final = "StartChild"
"""A fan-out's child start job run."""
SETTLE_FAN_OUT: Final = "SettleFanOut"
"""A settled fan-out's answer stepped into its parent."""

OPERATIONS: Final = (
    CREATE,
    STEP,
    FIRE,
    CANCEL,
    MIGRATE,
    MACROSTEP,
    SCHEDULE_TIMER,
    SCHEDULE_TIMERS,
    FIRE_TIMER,
    CANCEL_TIMER,
    START_INVOKE,
    RUN_INVOKE,
    ANSWER_INVOKE,
    START_CHILD,
    SETTLE_FAN_OUT,
)
"""Every operation a span may be, in the order the docs list them."""

FACTS: Final = frozenset(
    {
        "attempt",  # the job's attempt (1 for a first delivery)
        "cancelled",  # how many pending timers a <cancel> cancelled
        "chart",  # the chart's name
        "conflict",  # a timer that existed already (a drive replayed)
        "count",  # how many jobs a batch holds
        "delay_ms",  # a timer's delay
        "event",  # an event's name
        "execution_id",  # a durable execution's id
        "handler",  # an invocation handler's import path
        "index",  # a fan-out child's index
        "invoke_id",  # an invocation's id
        "invoke_type",  # an invocation's type
        "job_id",  # an oban job's id
        "lateness_ms",  # how long after its due time a timer job started
        "ordinal",  # a delayed send's ordinal
        "outcome",  # how the operation ended (stepped, delivered, discarded...)
        "queue",  # an oban queue
        "reason",  # why it was discarded, declined or failed
        "revision",  # the chart revision's identity
        "scope",  # a job's scope: a session id or an execution id
        "send_id",  # a send id
        "session_id",  # a live session's id
        "states",  # the active atomic states after the operation
        "status",  # a durable execution's status after the operation
        "step_count",  # a durable execution's step count after the operation
        "stored",  # how many timers of a batch were stored anew (not found existing)
        "trigger",  # what a macrostep processed: initial, event, timer, fired, invoked...
    }
)
"""The facts a span may carry (keyword arguments of :meth:`Instrumentation.span` and
:meth:`Span.set`); the docs map each to its attribute."""


NO_PARENT: Final = object()
"""``parent=NO_PARENT``: the span starts a new trace, whatever context is current (a live
session's task runs the entries of many senders; one queued with no context has none)."""


class Span(Protocol):
    """A span, open; facts learned on the way are added with :meth:`set`."""

    def set(self, **facts: object) -> None:
        """Add or replace facts (names from :data:`FACTS`)."""

    def recording(self) -> bool:
        """Whether the span keeps its facts (False: they feed the metrics alone, so a fact
        that takes work to learn, such as a stored job's id, need not be learned)."""


class Instrumentation(Protocol):
    """What a tracing library provides to the paths that call it (ADR 30)."""

    def span(
        self,
        operation: str,
        *,
        parent: object = None,
        carried: object = None,
        **facts: object,
    ) -> AbstractContextManager[Span]:
        """A span for ``operation`` (one of :data:`OPERATIONS`), current inside the block.

        Its parent is the current context, unless ``parent`` is a context captured by
        :meth:`capture` (or :data:`NO_PARENT`: a new trace) or ``carried`` is a carrier
        read back from storage (untrusted: a malformed one is ignored). An exception
        leaving the block marks the span failed.
        """

    def carrier(self) -> dict[str, str] | None:
        """The current context as text to store with later work (None: nothing to carry)."""

    def capture(self) -> object:
        """The current context, to be the parent of a span started later elsewhere."""

    def continued(self, carrier: Mapping[str, str]) -> AbstractContextManager[None]:
        """Make the W3C trace context in ``carrier`` current inside the block."""

    def ids(self) -> tuple[str, str] | None:
        """The current trace id and span id in hex (None outside a recorded span)."""


current: Instrumentation | None = None
"""The instrumentation in force (None: tracing is off, and costs one read of this name)."""


def install(instrumentation: Instrumentation | None) -> Instrumentation | None:
    """Make ``instrumentation`` the one in force (None: off); return the one it replaces."""
    global current
    previous, current = current, instrumentation
    return previous


def continued(carrier: Mapping[str, str] | None) -> AbstractContextManager[None]:
    """Continue the caller's trace inside the block: the W3C ``traceparent`` (and
    ``tracestate``) in ``carrier`` (HTTP headers, say) becomes the parent of every span
    started there. Does nothing when tracing is off or ``carrier`` is None."""
    if current is None or carrier is None:
        return contextlib.nullcontext()
    return current.continued(carrier)


def carrier() -> dict[str, str] | None:
    """The current trace context to store with work that runs later (None when tracing is
    off or there is no context)."""
    if current is None:
        return None
    return current.carrier()


def log_ids() -> dict[str, str]:
    """``trace_id`` and ``span_id`` of the current span, for a log line (empty when tracing
    is off or no span is recorded)."""
    if current is None:
        return {}
    ids = current.ids()
    if ids is None:
        return {}
    return {"trace_id": ids[0], "span_id": ids[1]}


@contextlib.contextmanager
def installed(instrumentation: Instrumentation | None) -> Iterator[Instrumentation | None]:
    """``instrumentation`` in force inside the block, the previous one restored after."""
    previous = install(instrumentation)
    try:
        yield instrumentation
    finally:
        install(previous)
