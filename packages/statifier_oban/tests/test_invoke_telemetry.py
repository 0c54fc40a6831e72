"""The telemetry surface of the invoke half: names, exact key sets, exact values.

Each emitting test checks the whole ``meta`` an event carries (measurements and metadata
together, as oban's events do): its key set against the documented one, ``system_time``
against the clock, and every other value exactly.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from statifier_oban import telemetry
from statifier_oban._config import DEFAULT_INVOKE_DELIVERY
from statifier_oban._errors import ConfigError, InvalidScope
from statifier_oban.delivery import Discarded
from statifier_oban.invocations import _args, _enqueue
from statifier_oban.telemetry import (
    EVENT_KEYS,
    INVOKE_CANCELLED,
    INVOKE_DEFERRED,
    INVOKE_DELIVERED,
    INVOKE_DISCARDED,
    INVOKE_ENQUEUE_REJECTED,
    INVOKE_ENQUEUED,
    INVOKE_FAILED,
)

import oban_support.invoke_deliveries as deliveries
import oban_support.invoke_handlers as handlers
from oban_support.common import (
    SETTLED,
    capture_telemetry,
    database_fixture,
    insert_row,
    unique,
    wait_for_state,
)
from oban_support.invoke_harness import InvokeEnv, env_fixture, invoke_effect

RECORDING = "oban_support.invoke_deliveries:RecordingInvokeDelivery"
CAPTURE_PATH = "oban_support.invoke_handlers:CaptureHandler"

EVENTS = [
    "statifier_oban.timer.scheduled",
    "statifier_oban.timer.schedule_rejected",
    "statifier_oban.timer.cancelled",
    "statifier_oban.timer.fired",
    "statifier_oban.timer.discarded",
    "statifier_oban.invoke.enqueued",
    "statifier_oban.invoke.enqueue_rejected",
    "statifier_oban.invoke.cancelled",
    "statifier_oban.invoke.fan_out",
    "statifier_oban.invoke.child_started",
    "statifier_oban.invoke.unstarted_cancelled",
    "statifier_oban.invoke.delivered",
    "statifier_oban.invoke.discarded",
    "statifier_oban.invoke.failed",
    "statifier_oban.invoke.deferred",
]
"""Spec 2.16, in its order: five timer events, then ten invoke events."""


def keys(*names: str) -> frozenset[str]:
    """A documented key set (``system_time`` is on every event)."""
    return frozenset({"system_time", *names})


EXPECTED_KEYS = {
    "statifier_oban.timer.scheduled": keys(
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
    ),
    "statifier_oban.timer.schedule_rejected": keys("scope", "send_id", "ordinal", "reason"),
    "statifier_oban.timer.cancelled": keys(
        "count", "scope", "send_id", "ordinal", "caller_context"
    ),
    "statifier_oban.timer.fired": keys(
        "attempt", "scope", "send_id", "ordinal", "delivery", "job_id", "caller_context"
    ),
    "statifier_oban.timer.discarded": keys(
        "attempt", "scope", "send_id", "ordinal", "delivery", "reason", "job_id", "caller_context"
    ),
    "statifier_oban.invoke.enqueued": keys(
        "scope", "invoke_id", "macrostep", "handler", "queue", "conflict", "job_id"
    ),
    "statifier_oban.invoke.enqueue_rejected": keys("scope", "invoke_id", "handler", "reason"),
    "statifier_oban.invoke.cancelled": keys("count", "scope", "invoke_id", "handler"),
    "statifier_oban.invoke.fan_out": keys(
        "count", "scope", "invoke_id", "handler", "policy", "queue", "job_id", "caller_context"
    ),
    "statifier_oban.invoke.child_started": keys(
        "attempt", "scope", "invoke_id", "index", "count", "job_id", "caller_context"
    ),
    "statifier_oban.invoke.unstarted_cancelled": keys("count", "scope", "invoke_id"),
    "statifier_oban.invoke.delivered": keys(
        "attempt", "scope", "invoke_id", "macrostep", "handler", "delivery", "job_id"
    ),
    "statifier_oban.invoke.discarded": keys(
        "attempt", "scope", "invoke_id", "macrostep", "handler", "delivery", "reason", "job_id"
    ),
    "statifier_oban.invoke.failed": keys(
        "attempts", "scope", "invoke_id", "reason", "detail", "handler", "job_id"
    ),
    "statifier_oban.invoke.deferred": keys(
        "attempt", "scope", "invoke_id", "macrostep", "handler", "delivery", "job_id"
    ),
}
"""Spec 2.16's table (measurements and metadata), ``conflict?`` spelled ``conflict``."""


database = database_fixture()
env = env_fixture()


class Clock:
    """``system_time`` bounds: nanoseconds since the epoch, read around the action."""

    def __init__(self) -> None:
        self.start = time.time_ns()

    def check(self, meta: dict[str, Any], name: str, **expected: Any) -> None:
        """``meta`` has exactly ``name``'s keys, a fresh ``system_time`` and ``expected``."""
        assert set(meta) == EXPECTED_KEYS[name], f"{name} keys"
        stamp = meta["system_time"]
        assert isinstance(stamp, int)
        assert self.start <= stamp <= time.time_ns()
        assert {key: value for key, value in meta.items() if key != "system_time"} == expected


# --- names and key sets ---------------------------------------------------------------------


def test_events_are_exactly_the_fifteen_names_in_the_documented_order() -> None:
    assert telemetry.events() == EVENTS


def test_event_keys_are_the_documented_key_sets() -> None:
    assert set(EVENT_KEYS) == set(EVENTS)
    for name in EVENTS:
        assert EVENT_KEYS[name] == EXPECTED_KEYS[name], name


# --- enqueue and cancel ---------------------------------------------------------------------


async def test_enqueued_carries_the_job_and_flags_a_replay_as_a_conflict(env: InvokeEnv) -> None:
    queue = unique("parked")
    config = env.config(queue=queue)
    scope = unique("scope")
    effect = invoke_effect(macrostep=4, params={"card": "tok_secret"})
    clock = Clock()
    with capture_telemetry() as seen:
        job_id, _ = await _enqueue.enqueue(config, handlers.CaptureHandler, scope, effect)
        await _enqueue.enqueue(config, handlers.CaptureHandler, scope, effect)

    first, replay = seen.named(INVOKE_ENQUEUED, scope)
    common = {
        "scope": scope,
        "invoke_id": "capture",
        "macrostep": 4,
        "handler": CAPTURE_PATH,
        "queue": queue,
        "job_id": job_id,
    }
    clock.check(first, INVOKE_ENQUEUED, conflict=False, **common)
    clock.check(replay, INVOKE_ENQUEUED, conflict=True, **common)
    assert "tok_secret" not in repr(seen.events)  # params are never emitted


async def test_enqueue_rejected_has_no_scope_for_an_invalid_one_and_the_scope_otherwise(
    env: InvokeEnv,
) -> None:
    clock = Clock()
    with capture_telemetry() as seen:
        with pytest.raises(InvalidScope):
            await _enqueue.enqueue(
                env.config(queue=unique("parked")),
                handlers.CaptureHandler,
                "",
                invoke_effect(invoke_id="bad_scope"),
            )
        scope = unique("scope")
        with pytest.raises(ConfigError):
            await _enqueue.enqueue(
                env.config(queue=None),
                handlers.CaptureHandler,
                scope,
                invoke_effect(invoke_id="no_queue"),
            )

    invalid, missing = seen.named(INVOKE_ENQUEUE_REJECTED)
    clock.check(
        invalid,
        INVOKE_ENQUEUE_REJECTED,
        scope=None,
        invoke_id="bad_scope",
        handler=CAPTURE_PATH,
        reason="invalid_scope",
    )
    clock.check(
        missing,
        INVOKE_ENQUEUE_REJECTED,
        scope=scope,
        invoke_id="no_queue",
        handler=CAPTURE_PATH,
        reason="missing_invoke_queue",
    )
    assert seen.named(INVOKE_ENQUEUED) == []


async def test_invoke_cancelled_carries_the_count_of_every_generation(env: InvokeEnv) -> None:
    config = env.config(queue=unique("parked"))
    scope = unique("scope")
    for macrostep in (1, 2):
        await _enqueue.enqueue(
            config, handlers.CaptureHandler, scope, invoke_effect(macrostep=macrostep)
        )
    clock = Clock()
    with capture_telemetry() as seen:
        await _enqueue.cancel(config, scope, "capture", handler=handlers.CaptureHandler)
        await _enqueue.cancel(config, scope, "capture")

    swept, nothing = seen.named(INVOKE_CANCELLED, scope)
    clock.check(
        swept, INVOKE_CANCELLED, count=2, scope=scope, invoke_id="capture", handler=CAPTURE_PATH
    )
    clock.check(nothing, INVOKE_CANCELLED, count=0, scope=scope, invoke_id="capture", handler=None)


# --- the worker's verdicts ------------------------------------------------------------------


async def run_job(env: InvokeEnv, handler: type, scope: str, **effect: Any) -> tuple[int, str, Any]:
    """Enqueue onto a running queue with the recording delivery; wait until it settles."""
    queue = unique("invokes")
    config = env.config(await env.server(queue), queue, invoke_delivery=RECORDING)
    job_id, _ = await _enqueue.enqueue(config, handler, scope, invoke_effect(**effect))
    row = await wait_for_state(env.pool, job_id, *SETTLED)
    return job_id, queue, row


async def test_delivered_names_the_job_and_the_delivery(env: InvokeEnv) -> None:
    scope = unique("scope")
    clock = Clock()
    with capture_telemetry() as seen:
        job_id, _, row = await run_job(
            env, handlers.CaptureHandler, scope, macrostep=3, params={"amount": "secret-42"}
        )

    assert row.state == "completed"
    (event,) = seen.named(INVOKE_DELIVERED, scope)
    clock.check(
        event,
        INVOKE_DELIVERED,
        attempt=1,
        scope=scope,
        invoke_id="capture",
        macrostep=3,
        handler=CAPTURE_PATH,
        delivery=RECORDING,
        job_id=job_id,
    )
    assert "secret-42" not in repr(seen.events)  # neither params nor donedata are emitted
    handlers.forget(scope)
    deliveries.forget(scope)


async def test_the_default_delivery_is_named_by_its_path(
    env: InvokeEnv,
) -> None:
    queue = unique("invokes")
    config = env.config(await env.server(queue), queue)
    scope = unique("gone")
    with capture_telemetry() as seen:
        job_id, _ = await _enqueue.enqueue(config, handlers.CaptureHandler, scope, invoke_effect())
        await wait_for_state(env.pool, job_id, *SETTLED)

    (event,) = seen.named(INVOKE_DISCARDED, scope)  # no session: discarded as terminated
    assert (event["delivery"], event["reason"]) == (DEFAULT_INVOKE_DELIVERY, "terminated")
    handlers.forget(scope)


async def test_discarded_carries_the_reason(env: InvokeEnv) -> None:
    scope = unique("scope")
    deliveries.ANSWERS[scope] = Discarded("completed")
    clock = Clock()
    with capture_telemetry() as seen:
        job_id, _, row = await run_job(env, handlers.CaptureHandler, scope, macrostep=2)

    assert row.state == "cancelled"
    assert "discarded: completed" in row.error_text
    (event,) = seen.named(INVOKE_DISCARDED, scope)
    clock.check(
        event,
        INVOKE_DISCARDED,
        attempt=1,
        scope=scope,
        invoke_id="capture",
        macrostep=2,
        handler=CAPTURE_PATH,
        delivery=RECORDING,
        reason="completed",
        job_id=job_id,
    )
    assert seen.named(INVOKE_DELIVERED, scope) == []
    handlers.forget(scope)
    deliveries.forget(scope)


async def test_failed_is_emitted_for_the_terminal_run_failure_only(env: InvokeEnv) -> None:
    terminal, retrying = unique("terminal"), unique("retrying")
    clock = Clock()
    with capture_telemetry() as seen:
        job_id, _, row = await run_job(env, handlers.OnceHandler, terminal)
        _, _, other = await run_job(env, handlers.ThriceHandler, retrying)

    assert (row.state, other.state) == ("discarded", "retryable")
    (event,) = seen.named(INVOKE_FAILED, terminal)
    clock.check(
        event,
        INVOKE_FAILED,
        attempts=1,
        scope=terminal,
        invoke_id="capture",
        reason="run_failed",
        detail=repr({"code": "card_declined"}),
        handler="oban_support.invoke_handlers:OnceHandler",
        job_id=job_id,
    )
    assert seen.named(INVOKE_FAILED, retrying) == []
    handlers.forget(terminal, retrying)
    deliveries.forget(terminal, retrying)


async def test_failed_for_an_undecodable_row_has_no_handler(env: InvokeEnv) -> None:
    queue = unique("invokes")
    env.config(await env.server(queue), queue)
    scope = unique("scope")
    args = _args.encode(scope, CAPTURE_PATH, invoke_effect(invoke_id="corrupt"), None)
    args["macrostep"] = -1
    clock = Clock()
    with capture_telemetry() as seen:
        job_id = await insert_row(env.pool, args, queue=queue, meta={"delivery": RECORDING})
        row = await wait_for_state(env.pool, job_id, *SETTLED)

    assert row.state == "cancelled"
    (event,) = seen.named(INVOKE_FAILED, scope)
    detail = event["detail"]
    assert "macrostep" in detail
    clock.check(
        event,
        INVOKE_FAILED,
        attempts=1,
        scope=scope,
        invoke_id="corrupt",
        reason="undecodable",
        detail=detail,
        handler=None,
        job_id=job_id,
    )
    deliveries.forget(scope)


async def test_deferred_names_the_job_and_the_delivery(env: InvokeEnv) -> None:
    scope = unique("scope")
    clock = Clock()
    with capture_telemetry() as seen:
        job_id, _, row = await run_job(
            env, handlers.DeferringHandler, scope, invoke_id="report", macrostep=5
        )

    assert row.state == "completed"
    (event,) = seen.named(INVOKE_DEFERRED, scope)
    clock.check(
        event,
        INVOKE_DEFERRED,
        attempt=1,
        scope=scope,
        invoke_id="report",
        macrostep=5,
        handler="oban_support.invoke_handlers:DeferringHandler",
        delivery=RECORDING,
        job_id=job_id,
    )
    # The queue runs in this process: it may fetch and defer the job before the enqueuing
    # task resumes to report the enqueue, so the two events have no fixed order.
    assert sorted(seen.for_scope(scope)) == sorted([INVOKE_ENQUEUED, INVOKE_DEFERRED])
    assert deliveries.calls_for(scope) == []
    handlers.forget(scope)
