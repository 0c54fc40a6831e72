"""The ``InvokeHandler`` base, and an invocation end to end with a live ``Session``.

Class-definition checks (no run, bad ``max_attempts``), the run/1 vs run/2 forms as the
real ``InvokeWorker`` calls them, and the capture flow of the README on a real queue:
entering the state stores one job, the job's ``Ok`` becomes ``done.invoke.capture`` with
``<finalize>`` reading ``_event.data``, leaving the state first cancels the job, and a job
whose execution is gone is cancelled as discarded.
"""

from __future__ import annotations

from typing import Any

import pytest
from statifier.core.events import Event
from statifier_oban.invocations import _enqueue
from statifier_oban.invocations._handler import InvokeHandler, Ok, RunContext
from statifier_oban.telemetry import INVOKE_DELIVERED, INVOKE_DISCARDED

import oban_support.invoke_deliveries as deliveries
import oban_support.invoke_handlers as handlers
from oban_support.common import (
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
from oban_support.invoke_harness import InvokeEnv, env_fixture, invoke_effect, invoke_rows

CAPTURE = chart(
    """
    <datamodel>
      <data id="capture_id" expr="None"/>
      <data id="answered_for" expr="None"/>
    </datamodel>
    <state id="authorized">
      <transition event="capture.requested" target="capturing"/>
    </state>
    <state id="capturing">
      <invoke id="capture" type="myapp:capture">
        <param name="amount" expr="125"/>
        <finalize>
          <assign location="capture_id" expr="_event.data['capture_id']"/>
          <assign location="answered_for" expr="_event.invokeid"/>
        </finalize>
      </invoke>
      <transition event="done.invoke.capture" target="settled"/>
      <transition event="error.communication.invoke.capture" target="needs_attention"/>
      <transition event="capture.withdrawn" target="withdrawn"/>
    </state>
    <state id="needs_attention"/>
    <state id="withdrawn"/>
    <final id="settled"/>
    """,
    initial="authorized",
)


database = database_fixture()
env = env_fixture()
sessions = sessions_fixture()


# --- class definition -----------------------------------------------------------------------


def test_a_handler_defining_no_run_is_refused_when_the_class_is_defined() -> None:
    # sabotage: dropping the "run is InvokeHandler.run" check in __init_subclass__ turns it red.
    with pytest.raises(TypeError, match="run"):

        class NoRun(InvokeHandler):
            def config(self) -> Any:
                return None


@pytest.mark.parametrize("cap", [0, -1, 1.5, True, "3"], ids=repr)
def test_a_max_attempts_that_is_not_a_positive_integer_is_refused_at_definition(cap: Any) -> None:
    # sabotage: accepting bools (or any int) as the cap turns the True (or 0/-1) case red.
    with pytest.raises(TypeError, match="max_attempts"):

        class Capped(InvokeHandler):
            max_attempts = cap

            async def run(self, invoke: Any) -> Any:
                return Ok(None)


def test_a_positive_integer_or_no_cap_is_accepted() -> None:
    class Capped(InvokeHandler):
        max_attempts = 7

        async def run(self, invoke: Any) -> Any:
            return Ok(None)

    class Uncapped(InvokeHandler):
        async def run(self, invoke: Any) -> Any:
            return Ok(None)

    assert (Capped.max_attempts, Uncapped.max_attempts) == (7, None)


def test_the_arity_of_run_decides_whether_it_takes_a_context() -> None:
    # sabotage: counting only required parameters makes run(self, invoke, ctx=None) one-arg.
    assert handlers.CaptureHandler.run_takes_context is False
    assert handlers.ContextHandler.run_takes_context is True
    assert handlers.OptionalContextHandler.run_takes_context is True


async def test_run_with_a_context_gets_the_scope_and_invoke_id_and_run_without_does_not(
    env: InvokeEnv,
) -> None:
    queue = unique("invokes")
    config = env.config(
        await env.server(queue), queue, invoke_delivery=deliveries.RecordingInvokeDelivery
    )
    scope = unique("scope")
    jobs = {}
    for name, handler in [
        ("one", handlers.CaptureHandler),
        ("two", handlers.ContextHandler),
        ("optional", handlers.OptionalContextHandler),
    ]:
        jobs[name], _ = await _enqueue.enqueue(
            config, handler, scope, invoke_effect(invoke_id=f"inv_{name}")
        )
    for job_id in jobs.values():
        await wait_for_state(env.pool, job_id, "completed")

    by_id = {run.invoke.invoke_id: run for run in handlers.runs_for(scope)}
    assert by_id["inv_one"].ctx is handlers.NO_CONTEXT
    for name in ("two", "optional"):
        ctx = by_id[f"inv_{name}"].ctx
        assert isinstance(ctx, RunContext)
        assert (ctx.scope, ctx.invoke_id, ctx.attempt) == (scope, f"inv_{name}", 1)
        assert ctx.job_id == jobs[name]
    answers = {call.invoke_id: call.data for call in deliveries.calls_for(scope)}
    assert answers["inv_two"] == {"scope": scope, "invoke_id": "inv_two"}
    assert answers["inv_optional"] == {"had_context": True}
    handlers.forget(scope)
    deliveries.forget(scope)


# --- end to end with a live session ---------------------------------------------------------


async def test_an_ok_answer_reaches_the_session_as_done_invoke_and_finalize_reads_it(
    env: InvokeEnv, sessions: Sessions
) -> None:
    queue = unique("invokes")
    env.config(await env.server(queue), queue)
    scope = unique("sess")
    with capture_telemetry() as seen:
        session = await sessions.start(
            CAPTURE, session_id=scope, invoke_handlers={"myapp:capture": handlers.CaptureHandler}
        )
        session.send_event(Event(name="capture.requested"))
        await wait_until(lambda: session.status().status == "done", what="the chart settling")

    assert session.status().configuration == ("settled",)
    datamodel = session.snapshot().datamodel
    assert datamodel["capture_id"] == "cap-125"
    assert datamodel["answered_for"] == "capture"
    (row,) = await invoke_rows(env.pool, scope)
    # The answer can reach the session before oban acks the job: wait for the ack.
    row = await wait_for_state(env.pool, row.id, "completed", "cancelled", "discarded")
    assert row.state == "completed"  # exiting on its own answer never cancels the running job
    (run,) = handlers.runs_for(scope)
    assert run.invoke.params == {"amount": 125}
    assert len(seen.named(INVOKE_DELIVERED, scope)) == 1
    handlers.forget(scope)


async def test_leaving_the_invoking_state_before_the_job_runs_cancels_the_job(
    env: InvokeEnv, sessions: Sessions
) -> None:
    # A queue nobody runs: the job stays available until the exit cancels it.
    env.config(queue=unique("parked"))
    scope = unique("sess")
    session = await sessions.start(
        CAPTURE, session_id=scope, invoke_handlers={"myapp:capture": handlers.CaptureHandler}
    )
    session.send_event(Event(name="capture.requested"))
    await wait_for_configuration(session, "capturing")
    (row,) = await wait_until(lambda: invoke_rows(env.pool, scope), what="the job row")
    assert row.state == "available"

    session.send_event(Event(name="capture.withdrawn"))
    await wait_for_configuration(session, "withdrawn")
    cancelled = await wait_for_state(env.pool, row.id, "cancelled")
    assert "left its state" in cancelled.error_text
    assert len(await invoke_rows(env.pool, scope)) == 1
    assert handlers.runs_for(scope) == []


async def test_a_job_for_an_execution_that_is_gone_is_cancelled_as_discarded(
    env: InvokeEnv,
) -> None:
    queue = unique("invokes")
    config = env.config(await env.server(queue), queue)
    scope = unique("gone")  # no session was ever registered under it
    with capture_telemetry() as seen:
        job_id, _ = await _enqueue.enqueue(config, handlers.CaptureHandler, scope, invoke_effect())
        row = await wait_for_state(env.pool, job_id, "cancelled", "completed", "retryable")

    assert row.state == "cancelled"
    assert "discarded: terminated" in row.error_text
    (event,) = seen.named(INVOKE_DISCARDED, scope)
    assert (event["reason"], event["job_id"]) == ("terminated", job_id)
    assert seen.named(INVOKE_DELIVERED, scope) == []
    assert len(handlers.runs_for(scope)) == 1  # the handler ran; only the answer was dropped
    handlers.forget(scope)
