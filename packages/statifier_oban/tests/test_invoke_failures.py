"""Permanent invocation failure: the terminal attempt delivers ``error.communication.invoke``.

Real queues, real ``InvokeWorker``. ``max_attempts = 1`` makes the first attempt terminal;
multi-attempt flows move a retryable row along with SQL instead of waiting out oban's
backoff. With attempts remaining nothing is delivered; a custom delivery gets the failure
with the ``caller_context`` stored from the ``Invoke`` effect.
"""

from __future__ import annotations

from typing import Any

import pytest
from statifier.core.events import Event
from statifier_oban.invocations import _enqueue
from statifier_oban.invocations._handler import Error
from statifier_oban.telemetry import INVOKE_FAILED

import oban_support.invoke_deliveries as deliveries
import oban_support.invoke_handlers as handlers
from oban_support.common import (
    SETTLED,
    Sessions,
    capture_telemetry,
    chart,
    database_fixture,
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

CAPTURE = chart(
    """
    <datamodel><data id="failure" expr="None"/></datamodel>
    <state id="authorized"><transition event="capture.requested" target="capturing"/></state>
    <state id="capturing">
      <invoke id="capture" type="myapp:capture"><param name="amount" expr="125"/></invoke>
      <transition event="done.invoke.capture" target="settled"/>
      <transition event="error.communication.invoke.capture" target="needs_attention">
        <assign location="failure" expr="_event.data"/>
      </transition>
    </state>
    <state id="needs_attention"/>
    <final id="settled"/>
    """,
    initial="authorized",
)


class ProcessorDown(Exception):
    """What a crashing handler raises (its name must survive into the row's traceback)."""


database = database_fixture()
env = env_fixture()
sessions = sessions_fixture()


async def failed_session(env: InvokeEnv, sessions: Sessions, scope: str) -> Any:
    """Run CAPTURE with ``OnceHandler`` until the chart parks in ``needs_attention``."""
    session = await sessions.start(
        CAPTURE, session_id=scope, invoke_handlers={"myapp:capture": handlers.OnceHandler}
    )
    session.send_event(Event(name="capture.requested"))
    await wait_for_configuration(session, "needs_attention")
    return session


# --- the terminal attempt -------------------------------------------------------------------


async def test_an_error_on_the_terminal_attempt_delivers_run_failed_and_discards_the_job(
    env: InvokeEnv, sessions: Sessions
) -> None:
    queue = unique("invokes")
    env.config(await env.server(queue), queue)
    scope = unique("sess")
    # OnceHandler's default answer: Error({"code": "card_declined"}).

    session = await failed_session(env, sessions, scope)

    assert session.snapshot().datamodel["failure"] == failure(
        "run_failed", 1, repr({"code": "card_declined"})
    )
    (row,) = await invoke_rows(env.pool, scope)
    row = await wait_for_state(env.pool, row.id, "discarded")
    assert (row.attempt, row.max_attempts) == (1, 1)
    assert "card_declined" in row.error_text
    handlers.forget(scope)


async def test_a_raise_on_the_terminal_attempt_delivers_run_crashed_and_keeps_the_exception(
    env: InvokeEnv, sessions: Sessions
) -> None:
    queue = unique("invokes")
    env.config(await env.server(queue), queue)
    scope = unique("sess")

    def crash(invoke: Any, ctx: Any) -> Any:
        raise ProcessorDown("gateway answered 502")

    handlers.SCRIPTS[scope] = crash

    session = await failed_session(env, sessions, scope)

    assert session.snapshot().datamodel["failure"] == failure(
        "run_crashed", 1, "gateway answered 502"
    )
    (row,) = await invoke_rows(env.pool, scope)
    row = await wait_for_state(env.pool, row.id, "discarded")
    # The original exception is re-raised: oban records its traceback, not a wrapper's.
    assert "ProcessorDown: gateway answered 502" in row.error_text
    assert "Traceback" in row.error_text
    handlers.forget(scope)


@pytest.mark.parametrize("outcome", ["error", "raise"])
async def test_with_attempts_remaining_a_failure_delivers_nothing(
    env: InvokeEnv, outcome: str
) -> None:
    queue = unique("invokes")
    config = env.config(await env.server(queue), queue, invoke_delivery=RECORDING)
    scope = unique("scope")
    if outcome == "raise":

        def crash(invoke: Any, ctx: Any) -> Any:
            raise ProcessorDown("not yet")

        handlers.SCRIPTS[scope] = crash
    with capture_telemetry() as seen:
        job_id, _ = await _enqueue.enqueue(config, handlers.ThriceHandler, scope, invoke_effect())
        row = await wait_for_state(env.pool, job_id, *SETTLED)

    assert (row.state, row.attempt, row.max_attempts) == ("retryable", 1, 3)
    assert deliveries.calls_for(scope) == []
    assert seen.named(INVOKE_FAILED, scope) == []
    handlers.forget(scope)


async def test_an_error_retries_silently_until_the_last_attempt_then_delivers_once(
    env: InvokeEnv,
) -> None:
    queue = unique("invokes")
    config = env.config(await env.server(queue), queue, invoke_delivery=RECORDING)
    scope = unique("scope")
    job_id, _ = await _enqueue.enqueue(config, handlers.ThriceHandler, scope, invoke_effect())

    for attempt in (1, 2):
        row = await wait_for_state(env.pool, job_id, *SETTLED)
        assert (row.state, row.attempt) == ("retryable", attempt)
        assert deliveries.calls_for(scope) == []
        await run_now(env.pool, job_id)  # skip oban's backoff

        def ran_again(attempt: int = attempt) -> bool:
            return len(handlers.runs_for(scope)) > attempt

        await wait_until(ran_again, what=f"attempt {attempt + 1}")
    row = await wait_for_state(env.pool, job_id, "discarded")

    assert row.attempt == 3
    assert [run.attempt for run in handlers.runs_for(scope)] == [1, 2, 3]
    (call,) = deliveries.calls_for(scope)
    assert call.door == "deliver_failure"
    assert call.data == failure("run_failed", 3, repr("processor unavailable"))
    handlers.forget(scope)
    deliveries.forget(scope)


# --- a custom delivery ----------------------------------------------------------------------


async def test_a_custom_delivery_gets_the_failure_with_the_stored_caller_context(
    env: InvokeEnv,
) -> None:
    queue = unique("invokes")
    config = env.config(await env.server(queue), queue, invoke_delivery=RECORDING)
    scope = unique("scope")
    context = {"request": "r-7", "trail": [1, 2.5, None]}
    handlers.SCRIPTS[scope] = lambda invoke, ctx: Error(("timeout", invoke.invoke_id))

    job_id, _ = await _enqueue.enqueue(
        config, handlers.OnceHandler, scope, invoke_effect(invoke_id="pay", caller_context=context)
    )
    await wait_for_state(env.pool, job_id, "discarded")

    (call,) = deliveries.calls_for(scope)
    assert call == deliveries.Call(
        door="deliver_failure",
        scope=scope,
        invoke_id="pay",
        data=failure("run_failed", 1, repr(("timeout", "pay"))),
        caller_context=context,
        job_id=job_id,
    )
    handlers.forget(scope)
    deliveries.forget(scope)


async def test_a_custom_delivery_gets_the_answer_with_the_stored_caller_context(
    env: InvokeEnv,
) -> None:
    queue = unique("invokes")
    config = env.config(await env.server(queue), queue, invoke_delivery=RECORDING)
    scope = unique("scope")

    job_id, _ = await _enqueue.enqueue(
        config,
        handlers.CaptureHandler,
        scope,
        invoke_effect(invoke_id="pay", caller_context={"request": "r-8"}),
    )
    await wait_for_state(env.pool, job_id, "completed")

    (call,) = deliveries.calls_for(scope)
    assert (call.door, call.invoke_id, call.caller_context, call.job_id) == (
        "deliver",
        "pay",
        {"request": "r-8"},
        job_id,
    )
    assert call.data == {"capture_id": "cap-125", "invoke_id": "pay"}
    handlers.forget(scope)
    deliveries.forget(scope)
