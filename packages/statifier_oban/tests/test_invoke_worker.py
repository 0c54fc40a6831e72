"""``InvokeWorker`` on a real queue: bad rows, unresolvable handlers, run-time bounds, deferral.

* Undecodable rows are reported (when their identity is readable) and cancelled; a
  registered codec that cannot decode is a deploy-shaped fault, so the job retries; a
  codec or delivery the worker did not register is refused: the job is cancelled at once.
* ``unresolved_handler``: ``"retry"`` retries and tells nobody; ``"cancel"`` (the default)
  cancels and delivers ``invalid_handler``, unless the delivery itself does not resolve.
* ``invoke_timeout`` bounds ``run``; the terminal overrun delivers ``run_crashed``.
* ``Deferred()`` completes the job without calling either door; the host answers later.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from oban.job import Job
from psycopg.types.json import Jsonb
from statifier.core.events import Event
from statifier_oban._config import Config
from statifier_oban._names import INVOKE_WORKER
from statifier_oban.delivery import Delivered, SessionInvokeDelivery
from statifier_oban.invocations import _args, _enqueue
from statifier_oban.invocations._handler import Ok
from statifier_oban.telemetry import (
    INVOKE_DEFERRED,
    INVOKE_DELIVERED,
    INVOKE_FAILED,
)
from statifier_oban.workers import InvokeWorker

import oban_support.invoke_deliveries as deliveries
import oban_support.invoke_handlers as handlers
from oban_support.common import (
    SETTLED,
    Sessions,
    capture_telemetry,
    chart,
    database_fixture,
    execute,
    insert_row,
    sessions_fixture,
    unique,
    wait_for_configuration,
    wait_for_state,
    wait_until,
)
from oban_support.invoke_deliveries import failure
from oban_support.invoke_harness import (
    InvokeEnv,
    env_fixture,
    invoke_effect,
    invoke_rows,
    run_now,
)

RECORDING = "oban_support.invoke_deliveries:RecordingInvokeDelivery"
RECORDING_SESSION = "oban_support.invoke_deliveries:RecordingSessionInvokeDelivery"
MISSING_HANDLER = "oban_support.invoke_handlers:NoSuchHandler"

REPORT = chart(
    """
    <datamodel>
      <data id="report_id" expr="None"/>
      <data id="failure" expr="None"/>
      <data id="pings" expr="0"/>
    </datamodel>
    <state id="idle"><transition event="report.requested" target="reporting"/></state>
    <state id="reporting">
      <invoke id="report" type="myapp:report"/>
      <transition event="done.invoke.report" target="reported">
        <assign location="report_id" expr="_event.data['report_id']"/>
      </transition>
      <transition event="error.communication.invoke.report" target="needs_attention">
        <assign location="failure" expr="_event.data"/>
      </transition>
      <transition event="abandon" target="abandoned"/>
    </state>
    <state id="abandoned">
      <transition event="done.invoke.report" target="reported"/>
      <transition event="error.communication.invoke.report" target="needs_attention"/>
      <transition event="ping"><assign location="pings" expr="pings + 1"/></transition>
    </state>
    <state id="needs_attention"/>
    <state id="reported"/>
    """,
    initial="idle",
)


database = database_fixture()
env = env_fixture()
sessions = sessions_fixture()


async def running(env: InvokeEnv, **options: Any) -> tuple[Config, str]:
    """A config whose invoke queue is parked, and the name of a queue a server runs."""
    queue = unique("invokes")
    config = env.config(await env.server(queue), unique("parked"), **options)
    return config, queue


async def release(env: InvokeEnv, job_id: int, queue: str, **args: Any) -> None:
    """Overwrite top-level ``args`` keys of a parked job, then move it onto ``queue``."""
    for key, value in args.items():
        await execute(
            env.pool,
            "UPDATE oban_jobs SET args = jsonb_set(args, %s, %s) WHERE id = %s",
            [[key], Jsonb(value), job_id],
        )
    await execute(env.pool, "UPDATE oban_jobs SET queue = %s WHERE id = %s", [queue, job_id])


def valid_args(scope: str, invoke_id: str = "capture") -> dict[str, Any]:
    """The args ``enqueue`` would store for a ``CaptureHandler`` invocation."""
    return _args.encode(
        scope,
        "oban_support.invoke_handlers:CaptureHandler",
        invoke_effect(invoke_id=invoke_id),
        None,
    )


# --- undecodable rows -----------------------------------------------------------------------


async def test_a_corrupt_row_with_a_readable_identity_is_reported_then_cancelled(
    env: InvokeEnv,
) -> None:
    _, queue = await running(env)
    scope = unique("scope")
    args = {**valid_args(scope), "params": {"json": "{not json"}}
    with capture_telemetry() as seen:
        # Two attempts already spent: this run is attempt 3.
        job_id = await insert_row(
            env.pool, args, queue=queue, meta={"delivery": RECORDING}, attempt=2
        )
        row = await wait_for_state(env.pool, job_id, *SETTLED)

    assert row.state == "cancelled"
    assert "undecodable" in row.error_text
    (call,) = deliveries.calls_for(scope)
    assert (call.door, call.invoke_id, call.caller_context) == ("deliver_failure", "capture", None)
    assert (call.data["reason"], call.data["attempts"]) == ("undecodable", 3)
    assert "params" in call.data["detail"]
    (event,) = seen.named(INVOKE_FAILED, scope)
    assert (event["reason"], event["handler"], event["attempts"]) == ("undecodable", None, 3)
    assert handlers.runs_for(scope) == []
    deliveries.forget(scope)


async def test_a_row_with_a_timeout_no_config_writes_is_reported_then_cancelled(
    env: InvokeEnv,
) -> None:
    _, queue = await running(env)
    scope = unique("scope")
    meta = {"delivery": RECORDING, "timeout": 10**400}
    job_id = await insert_row(env.pool, valid_args(scope), queue=queue, meta=meta)
    row = await wait_for_state(env.pool, job_id, *SETTLED)

    assert (row.state, row.attempt) == ("cancelled", 1), row.error_text
    assert "undecodable: meta.timeout must be an integer of milliseconds" in row.error_text
    (call,) = deliveries.calls_for(scope)
    assert (call.door, call.data["reason"]) == ("deliver_failure", "undecodable")
    assert "meta.timeout" in call.data["detail"]
    assert handlers.runs_for(scope) == []
    deliveries.forget(scope)


@pytest.mark.parametrize(
    "damage",
    [
        {"scope": None},
        {"scope": ""},
        {"scope": 42},
        {"invoke_id": ""},
        {"invoke_id": None},
    ],
    ids=repr,
)
async def test_a_corrupt_row_without_a_readable_identity_is_cancelled_telling_nobody(
    env: InvokeEnv, damage: dict[str, Any]
) -> None:
    _, queue = await running(env)
    scope = unique("scope")
    args = {**valid_args(scope, unique("inv")), **damage}
    args = {key: value for key, value in args.items() if value is not None}
    with capture_telemetry() as seen:
        job_id = await insert_row(env.pool, args, queue=queue, meta={"delivery": RECORDING})
        row = await wait_for_state(env.pool, job_id, *SETTLED)

    assert row.state == "cancelled"
    assert "undecodable" in row.error_text
    assert deliveries.calls_in_job(job_id) == []
    assert seen.named(INVOKE_FAILED) == []


async def test_a_codec_that_fails_to_decode_retries_instead_of_cancelling(env: InvokeEnv) -> None:
    config, queue = await running(
        env, opaque_codec="oban_support.invoke_codecs:DecodeFailsCodec", invoke_delivery=RECORDING
    )
    scope = unique("scope")
    job_id, _ = await _enqueue.enqueue(config, handlers.CaptureHandler, scope, invoke_effect())
    await release(env, job_id, queue)
    row = await wait_for_state(env.pool, job_id, *SETTLED)

    assert (row.state, row.attempt) == ("retryable", 1)
    assert "rotated away" in row.error_text
    assert deliveries.calls_in_job(job_id) == []
    assert handlers.runs_for(scope) == []


async def test_a_codec_tag_that_is_not_registered_is_cancelled_as_undecodable(
    env: InvokeEnv,
) -> None:
    config, queue = await running(
        env, opaque_codec="oban_support.invoke_codecs:XorCodec", invoke_delivery=RECORDING
    )
    scope = unique("scope")
    job_id, _ = await _enqueue.enqueue(config, handlers.CaptureHandler, scope, invoke_effect())
    stored = (await invoke_rows(env.pool, scope))[0].args["params"]
    await release(
        env, job_id, queue, params={**stored, "codec": "oban_support.invoke_codecs:NoSuchCodec"}
    )
    row = await wait_for_state(env.pool, job_id, *SETTLED)

    assert (row.state, row.attempt) == ("cancelled", 1)
    assert "undecodable" in row.error_text
    assert "NoSuchCodec" in row.error_text
    assert handlers.runs_for(scope) == []


# --- unresolvable handlers and deliveries ---------------------------------------------------


@pytest.mark.parametrize(
    "handler",
    [
        MISSING_HANDLER,
        "support_invoke_no_such_module:Handler",
        "oban_support.invoke_deliveries:RecordingInvokeDelivery",  # resolves, but not a handler
    ],
)
async def test_under_the_retry_policy_an_unresolved_handler_retries_and_tells_nobody(
    env: InvokeEnv, handler: str
) -> None:
    config, queue = await running(env, invoke_delivery=RECORDING, unresolved_handler="retry")
    scope = unique("scope")
    with capture_telemetry() as seen:
        job_id, _ = await _enqueue.enqueue(config, handlers.CaptureHandler, scope, invoke_effect())
        await release(env, job_id, queue, handler=handler)
        row = await wait_for_state(env.pool, job_id, *SETTLED)
        assert (row.state, row.attempt) == ("retryable", 1)
        assert handler in row.error_text

        # The last attempt is no different: oban discards the job, nobody is told.
        await execute(env.pool, "UPDATE oban_jobs SET max_attempts = 2 WHERE id = %s", [job_id])
        await run_now(env.pool, job_id)
        row = await wait_for_state(env.pool, job_id, "discarded")

    assert row.attempt == 2
    assert deliveries.calls_for(scope) == []
    assert seen.named(INVOKE_FAILED, scope) == []


async def test_under_the_cancel_policy_an_unresolved_handler_is_cancelled_and_reported(
    env: InvokeEnv,
) -> None:
    config, queue = await running(env, invoke_delivery=RECORDING, unresolved_handler="cancel")
    scope = unique("scope")
    with capture_telemetry() as seen:
        job_id, _ = await _enqueue.enqueue(
            config,
            handlers.CaptureHandler,
            scope,
            invoke_effect(caller_context={"request": "r-3"}),
        )
        # One attempt already spent: the report names this attempt, 2.
        await execute(env.pool, "UPDATE oban_jobs SET attempt = 1 WHERE id = %s", [job_id])
        await release(env, job_id, queue, handler=MISSING_HANDLER)
        row = await wait_for_state(env.pool, job_id, *SETTLED)

    assert (row.state, row.attempt) == ("cancelled", 2)
    assert MISSING_HANDLER in row.error_text
    (call,) = deliveries.calls_for(scope)
    assert call.door == "deliver_failure"
    assert call.data == failure("invalid_handler", 2, MISSING_HANDLER)
    assert call.caller_context == {"request": "r-3"}
    (event,) = seen.named(INVOKE_FAILED, scope)
    assert event["handler"] is None
    assert (event["reason"], event["detail"], event["attempts"]) == (
        "invalid_handler",
        MISSING_HANDLER,
        2,
    )
    deliveries.forget(scope)


async def test_under_the_cancel_policy_an_unresolvable_delivery_is_cancelled_telling_nobody(
    env: InvokeEnv,
) -> None:
    config, queue = await running(
        env,
        invoke_delivery="oban_support.invoke_deliveries:DeliverOnlyDelivery",
        unresolved_handler="cancel",
    )
    scope = unique("scope")
    job_id, _ = await _enqueue.enqueue(config, handlers.CaptureHandler, scope, invoke_effect())
    await release(env, job_id, queue, handler=MISSING_HANDLER)
    row = await wait_for_state(env.pool, job_id, *SETTLED)

    assert (row.state, row.attempt) == ("cancelled", 1)
    assert "refused: meta.delivery" in row.error_text
    assert "deliver_failure" in row.error_text
    assert deliveries.calls_in_job(job_id) == []


async def test_a_delivery_without_deliver_failure_is_refused_and_the_job_cancelled_at_once(
    env: InvokeEnv,
) -> None:
    config, queue = await running(
        env, invoke_delivery="oban_support.invoke_deliveries:DeliverOnlyDelivery"
    )
    scope = unique("scope")
    job_id, _ = await _enqueue.enqueue(config, handlers.CaptureHandler, scope, invoke_effect())
    await release(env, job_id, queue)
    row = await wait_for_state(env.pool, job_id, *SETTLED)

    assert (row.state, row.attempt) == ("cancelled", 1)
    assert "deliver_failure" in row.error_text
    assert handlers.runs_for(scope) == []  # no door to answer through: the work is not done
    assert deliveries.calls_in_job(job_id) == []


# --- run-time bound -------------------------------------------------------------------------


async def sleep_two_seconds(invoke: Any, ctx: Any) -> Any:
    """A handler script that overruns any small bound."""
    await asyncio.sleep(2)
    return Ok("too late")


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        ({"timeout": 100}, 5.1),
        ({"timeout": 4_294_962_295}, 4_294_967.295),
        ({}, None),
        ({"timeout": 0}, None),
        ({"timeout": -5}, None),
        ({"timeout": "100"}, None),
        ({"timeout": True}, None),
        ({"timeout": 1.5}, None),
    ],
    ids=repr,
)
def test_the_worker_timeout_is_the_stored_bound_plus_five_seconds(
    meta: dict[str, Any], expected: float | None
) -> None:
    job = Job(worker=INVOKE_WORKER, args={}, meta=meta)
    assert InvokeWorker().timeout(job) == expected


async def test_an_overrun_fails_the_attempt_and_retries(env: InvokeEnv) -> None:
    config, queue = await running(env, invoke_timeout=100, invoke_delivery=RECORDING)
    scope = unique("scope")
    handlers.SCRIPTS[scope] = sleep_two_seconds
    job_id, _ = await _enqueue.enqueue(config, handlers.ThriceHandler, scope, invoke_effect())
    await release(env, job_id, queue)
    row = await wait_for_state(env.pool, job_id, *SETTLED)

    assert (row.state, row.attempt) == ("retryable", 1)
    assert "timed out after 100ms" in row.error_text
    assert deliveries.calls_for(scope) == []
    handlers.forget(scope)


async def test_an_overrun_on_the_terminal_attempt_delivers_run_crashed(env: InvokeEnv) -> None:
    config, queue = await running(env, invoke_timeout=100, invoke_delivery=RECORDING)
    scope = unique("scope")
    handlers.SCRIPTS[scope] = sleep_two_seconds
    job_id, _ = await _enqueue.enqueue(config, handlers.OnceHandler, scope, invoke_effect())
    await release(env, job_id, queue)
    row = await wait_for_state(env.pool, job_id, *SETTLED)

    assert row.state == "discarded"
    (call,) = deliveries.calls_for(scope)
    assert call.door == "deliver_failure"
    assert (call.data["reason"], call.data["attempts"]) == ("run_crashed", 1)
    assert "timed out after 100ms" in call.data["detail"]
    handlers.forget(scope)
    deliveries.forget(scope)


async def test_a_run_within_the_bound_answers_normally(env: InvokeEnv) -> None:
    config, queue = await running(env, invoke_timeout=100, invoke_delivery=RECORDING)
    scope = unique("scope")
    job_id, _ = await _enqueue.enqueue(config, handlers.CaptureHandler, scope, invoke_effect())
    await release(env, job_id, queue)
    row = await wait_for_state(env.pool, job_id, *SETTLED)

    assert row.state == "completed"
    assert row.meta["timeout"] == 100
    (call,) = deliveries.calls_for(scope)
    assert (call.door, call.data["capture_id"]) == ("deliver", "cap-125")
    handlers.forget(scope)
    deliveries.forget(scope)


async def test_a_timeout_error_the_handler_raises_itself_is_not_reported_as_an_overrun(
    env: InvokeEnv,
) -> None:
    # Spec 2.9 step 4: under a bound, a raise inside the run is replayed unchanged. Only the
    # bound's own expiry is an overrun ("timed out after <N>ms").
    config, queue = await running(env, invoke_timeout=5000, invoke_delivery=RECORDING)
    scope = unique("scope")

    def upstream_timeout(invoke: Any, ctx: Any) -> Any:
        raise TimeoutError("upstream read timed out")

    handlers.SCRIPTS[scope] = upstream_timeout
    job_id, _ = await _enqueue.enqueue(config, handlers.OnceHandler, scope, invoke_effect())
    await release(env, job_id, queue)
    row = await wait_for_state(env.pool, job_id, *SETTLED)

    assert row.state == "discarded"
    (call,) = deliveries.calls_for(scope)
    assert call.data == failure("run_crashed", 1, "upstream read timed out")
    assert "timed out after 5000ms" not in row.error_text
    handlers.forget(scope)
    deliveries.forget(scope)


# --- deferred -------------------------------------------------------------------------------


async def deferred_session(env: InvokeEnv, sessions: Sessions, scope: str) -> Any:
    """REPORT with ``DeferringHandler`` on a real queue, after its job has completed."""
    queue = unique("invokes")
    env.config(await env.server(queue), queue, invoke_delivery=RECORDING_SESSION)
    session = await sessions.start(
        REPORT, session_id=scope, invoke_handlers={"myapp:report": handlers.DeferringHandler}
    )
    session.send_event(Event(name="report.requested"))
    (row,) = await wait_until(lambda: invoke_rows(env.pool, scope), what="the job row")
    row = await wait_for_state(env.pool, row.id, *SETTLED)
    assert row.state == "completed"
    return session


async def test_a_deferred_run_completes_the_job_without_calling_either_door(
    env: InvokeEnv, sessions: Sessions
) -> None:
    scope = unique("sess")
    with capture_telemetry() as seen:
        session = await deferred_session(env, sessions, scope)

    assert len(handlers.runs_for(scope)) == 1
    assert deliveries.calls_for(scope) == []
    assert [meta["invoke_id"] for meta in seen.named(INVOKE_DEFERRED, scope)] == ["report"]
    assert seen.named(INVOKE_DELIVERED, scope) == []
    assert seen.named(INVOKE_FAILED, scope) == []
    status = session.status()
    assert (status.configuration, status.queued_events) == (("reporting",), 0)

    # The host's finishing side answers later, through its own delivery.
    assert SessionInvokeDelivery().deliver(scope, "report", {"report_id": 7}) == Delivered()
    await wait_for_configuration(session, "reported")
    assert session.snapshot().datamodel["report_id"] == 7
    handlers.forget(scope)


async def test_a_deferred_invocation_can_be_failed_later_with_the_finishers_own_words(
    env: InvokeEnv, sessions: Sessions
) -> None:
    scope = unique("sess")
    session = await deferred_session(env, sessions, scope)

    answer = SessionInvokeDelivery().deliver_failure(
        scope, "report", "report_failed", 2, "the source table was empty"
    )

    assert answer == Delivered()
    await wait_for_configuration(session, "needs_attention")
    assert session.snapshot().datamodel["failure"] == failure(
        "report_failed", 2, "the source table was empty"
    )
    handlers.forget(scope)


async def test_a_late_answer_after_the_invoking_state_was_left_is_dropped(
    env: InvokeEnv, sessions: Sessions
) -> None:
    scope = unique("sess")
    session = await deferred_session(env, sessions, scope)
    session.send_event(Event(name="abandon"))
    await wait_for_configuration(session, "abandoned")

    # The session is live, so the delivery says Delivered; the session drops the answers.
    assert SessionInvokeDelivery().deliver(scope, "report", {"report_id": 7}) == Delivered()
    assert (
        SessionInvokeDelivery().deliver_failure(scope, "report", "report_failed", 1, "late")
        == Delivered()
    )
    session.send_event(Event(name="ping"))  # processed after both answers
    await wait_until(lambda: session.snapshot().datamodel["pings"] == 1, what="the ping")

    assert session.status().configuration == ("abandoned",)
    assert session.snapshot().datamodel["report_id"] is None
    handlers.forget(scope)
