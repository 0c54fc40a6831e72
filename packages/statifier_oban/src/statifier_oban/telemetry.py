"""Telemetry events for the durable seams, emitted through oban's own telemetry.

Attach exactly as to oban's events::

    from oban import telemetry
    telemetry.attach("my-handler", statifier_oban.telemetry.events(), handler)

A handler receives ``(name, meta)``; ``meta`` holds the measurements (``system_time``
in nanoseconds since the epoch, and counts such as ``delay_ms``, ``count``, ``attempt``)
and the metadata together, as oban's events do. Every event is a point in time.
Nothing from ``data``, ``params`` or ``content`` is ever emitted. Emission never raises
into the caller.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from oban import telemetry as oban_telemetry

from .store import _oban_compat

logger = logging.getLogger("statifier_oban.telemetry")

PREFIX = "statifier_oban"

TIMER_SCHEDULED = f"{PREFIX}.timer.scheduled"
TIMER_SCHEDULE_REJECTED = f"{PREFIX}.timer.schedule_rejected"
TIMER_CANCELLED = f"{PREFIX}.timer.cancelled"
TIMER_FIRED = f"{PREFIX}.timer.fired"
TIMER_DISCARDED = f"{PREFIX}.timer.discarded"

INVOKE_ENQUEUED = f"{PREFIX}.invoke.enqueued"
INVOKE_ENQUEUE_REJECTED = f"{PREFIX}.invoke.enqueue_rejected"
INVOKE_CANCELLED = f"{PREFIX}.invoke.cancelled"
INVOKE_FAN_OUT = f"{PREFIX}.invoke.fan_out"
INVOKE_CHILD_STARTED = f"{PREFIX}.invoke.child_started"
INVOKE_UNSTARTED_CANCELLED = f"{PREFIX}.invoke.unstarted_cancelled"
INVOKE_DELIVERED = f"{PREFIX}.invoke.delivered"
INVOKE_DISCARDED = f"{PREFIX}.invoke.discarded"
INVOKE_FAILED = f"{PREFIX}.invoke.failed"
INVOKE_DEFERRED = f"{PREFIX}.invoke.deferred"

INVOKE_EVENTS = (
    INVOKE_ENQUEUED,
    INVOKE_ENQUEUE_REJECTED,
    INVOKE_CANCELLED,
    INVOKE_FAN_OUT,
    INVOKE_CHILD_STARTED,
    INVOKE_UNSTARTED_CANCELLED,
    INVOKE_DELIVERED,
    INVOKE_DISCARDED,
    INVOKE_FAILED,
    INVOKE_DEFERRED,
)

TIMER_EVENTS = (
    TIMER_SCHEDULED,
    TIMER_SCHEDULE_REJECTED,
    TIMER_CANCELLED,
    TIMER_FIRED,
    TIMER_DISCARDED,
)

EVENT_KEYS: dict[str, frozenset[str]] = {
    TIMER_SCHEDULED: frozenset(
        {
            "system_time",
            "delay_ms",
            "scope",
            "send_id",
            "ordinal",
            "macrostep",
            "microstep",
            "round",
            "scheduled_at",
            "queue",
            "conflict",
            "job_id",
            "caller_context",
        }
    ),
    TIMER_SCHEDULE_REJECTED: frozenset({"system_time", "scope", "send_id", "ordinal", "reason"}),
    TIMER_CANCELLED: frozenset(
        {"system_time", "count", "scope", "send_id", "ordinal", "caller_context"}
    ),
    TIMER_FIRED: frozenset(
        {
            "system_time",
            "attempt",
            "scope",
            "send_id",
            "ordinal",
            "delivery",
            "job_id",
            "caller_context",
        }
    ),
    TIMER_DISCARDED: frozenset(
        {
            "system_time",
            "attempt",
            "scope",
            "send_id",
            "ordinal",
            "delivery",
            "reason",
            "job_id",
            "caller_context",
        }
    ),
    INVOKE_ENQUEUED: frozenset(
        {"system_time", "scope", "invoke_id", "macrostep", "handler", "queue", "conflict", "job_id"}
    ),
    INVOKE_ENQUEUE_REJECTED: frozenset({"system_time", "scope", "invoke_id", "handler", "reason"}),
    INVOKE_CANCELLED: frozenset({"system_time", "count", "scope", "invoke_id", "handler"}),
    INVOKE_FAN_OUT: frozenset(
        {
            "system_time",
            "count",
            "scope",
            "invoke_id",
            "handler",
            "policy",
            "queue",
            "job_id",
            "caller_context",
        }
    ),
    INVOKE_CHILD_STARTED: frozenset(
        {
            "system_time",
            "attempt",
            "scope",
            "invoke_id",
            "index",
            "count",
            "job_id",
            "caller_context",
        }
    ),
    INVOKE_UNSTARTED_CANCELLED: frozenset({"system_time", "count", "scope", "invoke_id"}),
    INVOKE_DELIVERED: frozenset(
        {
            "system_time",
            "attempt",
            "scope",
            "invoke_id",
            "macrostep",
            "handler",
            "delivery",
            "job_id",
        }
    ),
    INVOKE_DISCARDED: frozenset(
        {
            "system_time",
            "attempt",
            "scope",
            "invoke_id",
            "macrostep",
            "handler",
            "delivery",
            "reason",
            "job_id",
        }
    ),
    INVOKE_FAILED: frozenset(
        {"system_time", "attempts", "scope", "invoke_id", "reason", "detail", "handler", "job_id"}
    ),
    INVOKE_DEFERRED: frozenset(
        {
            "system_time",
            "attempt",
            "scope",
            "invoke_id",
            "macrostep",
            "handler",
            "delivery",
            "job_id",
        }
    ),
}
"""The exact key set of each event's ``meta`` (measurements and metadata together)."""


def events() -> list[str]:
    """Every event name this package emits, in a stable order: timers, then invocations."""
    return [*TIMER_EVENTS, *INVOKE_EVENTS]


def handled(name: str) -> bool:
    """Whether anyone listens to ``name`` (a hot path can skip building its event)."""
    return _oban_compat.telemetry_handled(name)


def emit(name: str, **meta: Any) -> None:
    """Emit one event; a failure anywhere in telemetry is logged, never raised."""
    try:
        oban_telemetry.execute(name, {"system_time": time.time_ns(), **meta})
    except Exception:  # telemetry must never break the caller
        logger.exception("emitting %s failed", name, extra={"event": name})
