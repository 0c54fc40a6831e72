"""What a step does with each instruction of the planner: sends to the execution itself,
to other sessions, delayed sends, refusals, invocations and their answers, reports."""

from __future__ import annotations

import logging

import pytest
from psycopg_pool import AsyncConnectionPool
from statifier.core import effects as fx
from statifier.core import planner
from statifier.core.events import Event
from statifier_persistence import (
    NOT_LIVE,
    AlreadyApplied,
    Declined,
    Executions,
    Limits,
    Stepped,
    live_answer,
)

from persistence_support.common import (
    InjectedFailure,
    OutboxHost,
    TableExecutor,
    chart,
    effect_rows,
    scalar,
    unique,
)

SELF_SENDS = chart(
    """
    <datamodel><data id="seen" expr="[]"/></datamodel>
    <state id="s">
      <transition event="go">
        <send event="a"/>
        <send event="b"/>
        <assign location="seen" expr="seen + ['go']"/>
      </transition>
      <transition event="a">
        <assign location="seen" expr="seen + ['a']"/><send event="c"/>
      </transition>
      <transition event="b"><assign location="seen" expr="seen + ['b']"/></transition>
      <transition event="c"><assign location="seen" expr="seen + ['c']"/></transition>
      <transition event="loop"><send event="loop"/></transition>
      <transition event="finish" target="end"><send event="a"/></transition>
    </state>
    <final id="end"/>
    """
)

SENDER = chart(
    """
    <datamodel><data id="errors" expr="[]"/></datamodel>
    <state id="s">
      <transition event="tell-parent"><send event="hello" target="#_parent"/></transition>
      <transition event="tell-other"><send event="hello" target="#_scxml_someone"/></transition>
      <transition event="later-parent">
        <send event="hello" target="#_parent" delay="1s"/>
      </transition>
      <transition event="arm"><send id="t" event="tick" delay="1s"/></transition>
      <transition event="say"><log label="note" expr="'hello ' + str(len(errors))"/></transition>
      <transition event="error.*">
        <assign location="errors" expr="errors + [_event.name]"/>
      </transition>
    </state>
    """
)

INVOKER = chart(
    """
    <datamodel><data id="answer" expr="None"/></datamodel>
    <state id="working">
      <invoke id="job" type="test:job"><param name="n" expr="1"/></invoke>
      <transition event="done.invoke.job" target="done">
        <assign location="answer" expr="_event.data"/>
      </transition>
      <transition event="error.communication.invoke.job" target="failed"/>
      <transition event="abort" target="aborted"/>
      <transition event="poke"><send event="poke" target="#_job"/></transition>
      <transition event="error.communication" target="unreachable"/>
    </state>
    <state id="aborted"/>
    <state id="failed"/>
    <state id="unreachable"/>
    <final id="done"/>
    """
)


async def test_sends_to_itself_are_driven_in_the_same_transaction_in_order(
    executions: Executions,
) -> None:
    execution_id = unique()
    await executions.create(SELF_SENDS, execution_id=execution_id)
    stepped = await executions.step(execution_id, Event(name="go"))
    assert isinstance(stepped, Stepped)
    # External-queue order, as a live session: a, b (sent by go), then c (sent by a).
    assert stepped.state.datamodel["seen"] == ["go", "a", "b", "c"]
    assert stepped.execution.step_count == 2
    assert stepped.state.macrostep == 5  # the initial one, then go, a, b and c


async def test_sends_to_itself_are_bounded_and_a_runaway_fails(
    store: AsyncConnectionPool, executor: TableExecutor
) -> None:
    executions = Executions(store, executor=executor, limits=Limits(max_self_sends=5))
    execution_id = unique()
    await executions.create(SELF_SENDS, execution_id=execution_id)
    stepped = await executions.step(execution_id, Event(name="loop"))
    assert isinstance(stepped, Stepped)
    assert stepped.execution.status == "failed"
    assert stepped.execution.failure == {"reason": "self_send_limit", "limit": 5, "undelivered": 1}


async def test_a_send_to_itself_after_the_chart_finished_is_dropped(
    executions: Executions,
) -> None:
    execution_id = unique()
    await executions.create(SELF_SENDS, execution_id=execution_id)
    stepped = await executions.step(execution_id, Event(name="finish"))
    assert isinstance(stepped, Stepped)
    assert stepped.execution.status == "completed"
    assert stepped.state.datamodel["seen"] == []


async def test_sends_to_other_sessions_are_errors_with_the_default_host(
    executions: Executions, caplog: pytest.LogCaptureFixture
) -> None:
    execution_id = unique()
    await executions.create(SENDER, execution_id=execution_id)
    with caplog.at_level(logging.WARNING, logger="statifier_persistence"):
        for name in ("tell-parent", "tell-other"):
            stepped = await executions.step(execution_id, Event(name=name))
            assert isinstance(stepped, Stepped)
    assert isinstance(stepped, Stepped)  # again for mypy, which also weighs a loop never run
    assert stepped.state.datamodel["errors"] == ["error.communication"] * 2
    assert sum("error.communication" in r.message for r in caplog.records) == 2


async def test_a_host_reaches_other_sessions_inside_the_step_transaction(
    store: AsyncConnectionPool, executor: TableExecutor
) -> None:
    host = OutboxHost(routes=("#_parent",))
    executions = Executions(store, executor=executor, host=host)
    execution_id = unique()
    await executions.create(SENDER, execution_id=execution_id)
    stepped = await executions.step(execution_id, Event(name="tell-parent"))
    assert isinstance(stepped, Stepped)
    assert stepped.state.datamodel["errors"] == []
    outbox = "SELECT target, event FROM test_outbox WHERE execution_id = %s"
    async with store.connection() as conn:
        rows = await (await conn.execute(outbox, [execution_id])).fetchall()
    assert rows == [("ParentTarget", "hello")]
    # A step that rolls back takes the host's row with it.
    executor.fail.add("schedule")
    await executions.step(execution_id, Event(name="tell-parent"))  # commits: 2 rows
    with pytest.raises(InjectedFailure):
        await executions.step(execution_id, Event(name="arm"))
    count = "SELECT count(*) FROM test_outbox WHERE execution_id = %s"
    assert await scalar(store, count, [execution_id]) == 2


async def test_a_delayed_send_to_the_parent_is_a_timer_routed_when_it_fires(
    store: AsyncConnectionPool, executor: TableExecutor
) -> None:
    """Every target has a durable form: the timer is stored, then delivered as an
    immediate send would be (here through the host's outbox), once per key."""
    executions = Executions(store, executor=executor, host=OutboxHost(routes=("#_parent",)))
    execution_id = unique()
    await executions.create(SENDER, execution_id=execution_id)
    stepped = await executions.step(execution_id, Event(name="later-parent"))
    assert isinstance(stepped, Stepped)
    assert stepped.state.datamodel["errors"] == []
    [row] = await effect_rows(store, execution_id)
    assert row[0] == "schedule"
    [(_, ordinal)] = [key for key in executor.timers if key[0] == execution_id]
    delayed = executor.timers[(execution_id, ordinal)]
    assert delayed.target == "#_parent"
    outbox = "SELECT target, event FROM test_outbox WHERE execution_id = %s"
    fired = await executions.fire(execution_id, delayed, key="job:1")
    assert isinstance(fired, Stepped)
    again = await executions.fire(execution_id, delayed, key="job:1")
    assert isinstance(again, AlreadyApplied)
    async with store.connection() as conn:
        rows = await (await conn.execute(outbox, [execution_id])).fetchall()
    assert rows == [("ParentTarget", "hello")]


async def test_a_fired_send_to_internal_joins_the_internal_queue(
    store: AsyncConnectionPool, executor: TableExecutor
) -> None:
    chart_ = chart(
        """
        <datamodel><data id="seen" expr="[]"/></datamodel>
        <state id="s">
          <onentry><send event="inner" target="#_internal" delay="1s"/></onentry>
          <transition event="inner" target="t">
            <assign location="seen" expr="seen + [_event.type]"/>
          </transition>
        </state>
        <state id="t"/>
        """
    )
    executions = Executions(store, executor=executor)
    execution_id = unique()
    created = await executions.create(chart_, execution_id=execution_id)
    [delayed] = [e for e in created.effects if isinstance(e, fx.SendDelayed)]
    fired = await executions.fire(execution_id, delayed)
    assert isinstance(fired, Stepped)
    assert fired.state.active_leaf_ids() == ("t",)
    assert fired.state.datamodel["seen"] == ["internal"]
    assert fired.state.macrostep == created.state.macrostep  # no new macrostep


async def test_a_refused_timer_is_an_error_in_the_chart_not_a_failed_step(
    executions: Executions, executor: TableExecutor, store: AsyncConnectionPool
) -> None:
    execution_id = unique()
    await executions.create(SENDER, execution_id=execution_id)
    executor.refuse.add("schedule")
    stepped = await executions.step(execution_id, Event(name="arm"))
    assert isinstance(stepped, Stepped)
    assert stepped.state.datamodel["errors"] == ["error.communication"]
    raised = [e for e in stepped.effects if isinstance(e, fx.ErrorRaised)]
    assert raised[0].sendid == "t"
    assert "schedule refused" in raised[0].message
    assert await effect_rows(store, execution_id) == []


async def test_reports_reach_the_host_after_commit_only(
    store: AsyncConnectionPool, executor: TableExecutor
) -> None:
    host = OutboxHost()
    executions = Executions(store, executor=executor, host=host)
    execution_id = unique()
    await executions.create(SENDER, execution_id=execution_id)
    await executions.step(execution_id, Event(name="say"))
    assert [(sid, type(e).__name__, e.value) for sid, e in host.reported] == [  # type: ignore[union-attr]
        (execution_id, "Log", "hello 0")
    ]
    executor.fail.add("schedule")
    with pytest.raises(InjectedFailure):
        await executions.step(execution_id, Event(name="arm"))
    assert len(host.reported) == 1


async def test_an_invocation_is_started_and_its_answer_applied_while_live(
    executions: Executions, store: AsyncConnectionPool
) -> None:
    execution_id = unique()
    created = await executions.create(INVOKER, execution_id=execution_id)
    assert created.state.invocations
    assert await effect_rows(store, execution_id) == [("invoke", None, None, "job", False)]
    answer = planner.invocation_done("job", {"ok": True})
    stepped = await executions.step(execution_id, live_answer(answer), key="job:9")
    assert isinstance(stepped, Stepped)
    assert stepped.execution.status == "completed"
    assert stepped.state.datamodel["answer"] == {"ok": True}


async def test_a_late_answer_of_a_stopped_invocation_is_declined(
    executions: Executions, store: AsyncConnectionPool
) -> None:
    execution_id = unique()
    await executions.create(INVOKER, execution_id=execution_id)
    await executions.step(execution_id, Event(name="abort"))
    assert [row[0] for row in await effect_rows(store, execution_id)] == ["invoke", "stop"]
    answer = planner.invocation_failed("job", "too late")
    declined = await executions.step(execution_id, live_answer(answer), key="job:10")
    assert isinstance(declined, Declined)
    assert declined.reason == NOT_LIVE
    _, state = await executions.load(execution_id)
    assert state.active_leaf_ids() == ("aborted",)
    assert declined.execution.step_count == 2


async def test_a_refused_invocation_fails_to_start_in_the_chart(
    executions: Executions, executor: TableExecutor
) -> None:
    executor.refuse.add("invoke")
    created = await executions.create(INVOKER, execution_id=unique())
    assert created.state.active_leaf_ids() == ("failed",)


async def test_an_invoke_type_the_executor_does_not_start_is_an_error(
    store: AsyncConnectionPool,
) -> None:
    executions = Executions(store, executor=TableExecutor(invoke_types=()))
    created = await executions.create(INVOKER, execution_id=unique())
    raised = [e for e in created.effects if isinstance(e, fx.ErrorRaised)]
    assert [e.name for e in raised] == ["error.execution"]
    assert "not registered" in raised[0].message


async def test_a_send_to_an_invocation_goes_to_the_executor(
    executions: Executions, executor: TableExecutor, store: AsyncConnectionPool
) -> None:
    refused = unique()
    await executions.create(INVOKER, execution_id=refused)
    stepped = await executions.step(refused, Event(name="poke"))
    assert isinstance(stepped, Stepped)
    assert stepped.state.active_leaf_ids() == ("unreachable",)
    executor.forwards = True
    taken = unique()
    await executions.create(INVOKER, execution_id=taken)
    stepped = await executions.step(taken, Event(name="poke"))
    assert isinstance(stepped, Stepped)
    assert stepped.state.active_leaf_ids() == ("working",)
    assert [row[0] for row in await effect_rows(store, taken)] == ["invoke", "forward"]


LOUD = chart(
    """
    <state id="s">
      <transition event="log"><log label="big" expr="'x'.repeat(2000000)"/></transition>
      <transition event="throw"><script>throw new Error("y".repeat(2000000))</script></transition>
    </state>
    """,
    datamodel="ecmascript",
)


async def test_the_default_host_logs_a_bounded_line_whatever_the_chart_logs(
    executions: Executions, caplog: pytest.LogCaptureFixture
) -> None:
    # A chart controls its <log> values and its error messages; every worker that steps
    # it writes the log line, so the line is cut, never the whole value.
    execution_id = unique()
    await executions.create(LOUD, execution_id=execution_id)
    with caplog.at_level(logging.INFO, logger="statifier_persistence"):
        for name in ("log", "throw"):
            assert isinstance(await executions.step(execution_id, Event(name=name)), Stepped)
    lines = [r.getMessage() for r in caplog.records if r.name == "statifier_persistence"]
    assert len(lines) == 2
    assert "[log] big: 'xxx" in lines[0]
    assert "[error.execution]" in lines[1]
    assert all(execution_id in line and len(line) < 1000 for line in lines)
