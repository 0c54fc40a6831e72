"""What each fact of ``statifier.instrumentation`` is called on a span, and how each
operation's span is named and of which kind (docs/tracing.md prints these tables).

Values are bounded here, once: a text is clipped to :data:`MAX_TEXT` characters (names in
span names to :data:`MAX_NAME`), a list to :data:`MAX_ITEMS` items, an integer beyond 64
bits becomes its clipped text, anything else its ``brief``. Event data never reaches
this module: the paths that report facts hand over names and ids only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from opentelemetry.trace import SpanKind
from opentelemetry.util.types import AttributeValue
from statifier import instrumentation as seam
from statifier.values import brief, clip

MAX_TEXT: Final = 256
"""The most characters of a text attribute (a longer one is clipped, saying so)."""

MAX_NAME: Final = 64
"""The most characters of the name part of a span name (``Step:<chart name>``)."""

MAX_ITEMS: Final = 32
"""The most items of a list attribute (the active states)."""

_INT64 = 1 << 63

ATTRIBUTES: Final[Mapping[str, str]] = {
    "execution_id": "statifier.execution.id",
    "session_id": "statifier.session.id",
    "scope": "statifier.scope",
    "chart": "statifier.chart.name",
    "revision": "statifier.chart.revision",
    "event": "statifier.event.name",
    "states": "statifier.states",
    "status": "statifier.execution.status",
    "step_count": "statifier.execution.step_count",
    "trigger": "statifier.macrostep.trigger",
    "outcome": "statifier.outcome",
    "reason": "statifier.reason",
    "send_id": "statifier.send.id",
    "ordinal": "statifier.send.ordinal",
    "delay_ms": "statifier.timer.delay_ms",
    "lateness_ms": "statifier.timer.lateness_ms",
    "cancelled": "statifier.timer.cancelled",
    "stored": "statifier.timer.stored",
    "conflict": "statifier.job.conflict",
    "attempt": "statifier.job.attempt",
    "invoke_id": "statifier.invoke.id",
    "invoke_type": "statifier.invoke.type",
    "handler": "statifier.invoke.handler",
    "index": "statifier.fan_out.index",
    "job_id": "messaging.message.id",
    "queue": "messaging.destination.name",
    "count": "messaging.batch.message_count",
}
"""Fact name -> span attribute: OpenTelemetry's semantic conventions where one exists
(messaging), the ``statifier.*`` namespace otherwise."""

MESSAGING_SYSTEM: Final = "oban"
"""``messaging.system`` of every job span."""

DB_SYSTEM: Final = "postgresql"
"""``db.system.name`` of every durable execution span (one transaction in PostgreSQL)."""

_EXECUTION = {"db.system.name": DB_SYSTEM}
_SEND = {"messaging.system": MESSAGING_SYSTEM, "messaging.operation.type": "send"}
_PROCESS = {"messaging.system": MESSAGING_SYSTEM, "messaging.operation.type": "process"}
_NONE: Mapping[str, AttributeValue] = {}


class Operation:
    """How one operation's span is made: its kind, the fact naming it, fixed attributes."""

    __slots__ = ("attributes", "kind", "subject")

    def __init__(
        self, kind: SpanKind, subject: str, attributes: Mapping[str, AttributeValue]
    ) -> None:
        self.kind = kind
        self.subject = subject
        self.attributes = attributes


OPERATIONS: Final[Mapping[str, Operation]] = {
    seam.CREATE: Operation(SpanKind.CLIENT, "chart", _EXECUTION),
    seam.STEP: Operation(SpanKind.CLIENT, "chart", _EXECUTION),
    seam.FIRE: Operation(SpanKind.CLIENT, "chart", _EXECUTION),
    seam.CANCEL: Operation(SpanKind.CLIENT, "chart", _EXECUTION),
    seam.MIGRATE: Operation(SpanKind.CLIENT, "chart", _EXECUTION),
    seam.MACROSTEP: Operation(SpanKind.INTERNAL, "chart", _NONE),
    seam.SCHEDULE_TIMER: Operation(SpanKind.PRODUCER, "event", _SEND),
    seam.SCHEDULE_TIMERS: Operation(SpanKind.PRODUCER, "queue", _SEND),
    seam.FIRE_TIMER: Operation(SpanKind.CONSUMER, "event", _PROCESS),
    seam.CANCEL_TIMER: Operation(SpanKind.INTERNAL, "send_id", _NONE),
    seam.START_INVOKE: Operation(SpanKind.PRODUCER, "invoke_type", _SEND),
    seam.RUN_INVOKE: Operation(SpanKind.CONSUMER, "invoke_type", _PROCESS),
    seam.ANSWER_INVOKE: Operation(SpanKind.INTERNAL, "invoke_type", _NONE),
    seam.START_CHILD: Operation(SpanKind.CONSUMER, "invoke_id", _PROCESS),
    seam.SETTLE_FAN_OUT: Operation(SpanKind.CONSUMER, "invoke_id", _PROCESS),
}
"""Every operation of ``statifier.instrumentation``: a span is named ``Verb:Name`` (the
operation, then its subject fact's value), ``Verb`` alone while the subject is unknown."""


def span_name(operation: str, subject: object) -> str:
    """``Operation:subject`` (clipped), or the operation alone without a subject."""
    if subject is None:
        return operation
    text = subject if isinstance(subject, str) else brief(subject, MAX_NAME)
    if len(text) > MAX_NAME:
        text = text[:MAX_NAME] + "..."
    return f"{operation}:{text}"


def value(raw: object) -> AttributeValue | None:
    """``raw`` as a bounded attribute value (None: leave the attribute out)."""
    if isinstance(raw, str):  # the common case first: a name or an id
        return raw if len(raw) <= MAX_TEXT else clip(raw, MAX_TEXT)
    if raw is None:
        return None
    if isinstance(raw, bool | float):
        return raw
    if isinstance(raw, int):
        return raw if -_INT64 <= raw < _INT64 else clip(str(raw)[: MAX_TEXT + 1], MAX_TEXT)
    if isinstance(raw, tuple | list):
        items = [clip(item, MAX_TEXT) if isinstance(item, str) else brief(item) for item in raw]
        return items[:MAX_ITEMS]
    return brief(raw)


def attributes(facts: Mapping[str, Any]) -> dict[str, AttributeValue]:
    """The attributes of ``facts`` (unknown facts and None values left out)."""
    mapped: dict[str, AttributeValue] = {}
    names = ATTRIBUTES
    for fact, raw in facts.items():
        key = names.get(fact)
        if key is None or raw is None:
            continue
        kind = type(raw)
        # Inlined for the common values (short texts, small ints): every traced step
        # converts a dozen of them.
        if (kind is str and len(raw) <= MAX_TEXT) or (kind is int and -_INT64 <= raw < _INT64):
            mapped[key] = raw
            continue
        converted = value(raw)
        if converted is not None:
            mapped[key] = converted
    return mapped
