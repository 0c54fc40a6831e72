"""Durable executions on real oban jobs: timers and invocation answers step executions.

Each test runs a server-mode Oban (a timers and an invoke queue of its own) in this
process, on the module's database; the deliveries named on the job rows are
``ExecutionDelivery``/``ExecutionInvokeDelivery``, stepping the ``Executions`` the rig
installed with ``use``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
import statifier
from psycopg import AsyncConnection
from statifier.core.effects import SendDelayed
from statifier.core.events import Event
from statifier_oban import Config, ConfigError, schedule
from statifier_oban.executions import ExecutionDelivery, ObanExecutor, execution_config
from statifier_oban.workers import INVOKE_WORKER, TIMER_WORKER
from statifier_persistence import (
    ExecutionExists,
    ExecutionIdNotFree,
    ExecutionNotFound,
    Executions,
    Stepped,
)

from oban_support.common import (
    TERMINAL,
    chart,
    database_fixture,
    execute,
    job_row,
    job_rows,
    unique,
    wait_for_state,
    wait_until,
)
from oban_support.executions import GatedHandler, HeldHandler, Rig, running_rig
from oban_support.harness import Servers, send_delayed, servers_fixture, set_due_now

database = database_fixture()
servers = servers_fixture()

TICKER = chart(
    """
    <datamodel><data id="ticks" expr="0"/><data id="limit" expr="3"/></datamodel>
    <state id="ticking">
      <onentry><send id="tick" event="tick" delay="100ms"/></onentry>
      <onexit><cancel sendid="tick"/></onexit>
      <transition event="tick" cond="ticks + 1 &lt; limit" target="ticking">
        <assign location="ticks" expr="ticks + 1"/>
      </transition>
      <transition event="tick" target="done">
        <assign location="ticks" expr="ticks + 1"/>
      </transition>
      <transition event="stop" target="stopped"/>
    </state>
    <state id="stopped"/>
    <final id="done"/>
    """,
    name="ticker",
)

NO_CANCEL = chart(
    """
    <state id="armed">
      <onentry><send id="late" event="late" delay="1h"/></onentry>
      <transition event="finish" target="end"/>
      <transition event="late" target="end"/>
    </state>
    <final id="end"/>
    """
)

INVOKING = chart(
    """
    <datamodel><data id="answer" expr="None"/></datamodel>
    <state id="working">
      <invoke id="job" type="test:echo"><param name="n" expr="7"/></invoke>
      <transition event="done.invoke.job" target="done">
        <assign location="answer" expr="_event.data"/>
      </transition>
    </state>
    <final id="done"/>
    """
)

GATED = chart(
    """
    <state id="working">
      <invoke id="slow" type="test:gated"/>
      <transition event="done.invoke.slow" target="answered"/>
      <transition event="abort" target="aborted"/>
    </state>
    <state id="answered"/>
    <state id="aborted"/>
    """
)


@pytest_asyncio.fixture
async def rig(servers: Servers) -> AsyncIterator[Rig]:
    """A running rig for this test."""
    async with running_rig(servers) as world:
        yield world


async def timer_jobs(rig: Rig, execution_id: str) -> list[Any]:
    """The execution's timer job rows, oldest first."""
    return await job_rows(
        rig.server.pool,
        "worker = %s AND args->>'scope' = %s ORDER BY id",
        [TIMER_WORKER, execution_id],
    )


async def test_timers_fire_into_the_execution_and_arm_the_next_one(rig: Rig) -> None:
    execution_id = unique("exe")
    await rig.executions.create(TICKER, execution_id=execution_id)

    async def finished() -> bool:
        # The last tick's job is acked (in a batch) after its step committed: the jobs
        # settling is part of the event.
        if (await rig.executions.get(execution_id)).status != "completed":
            return False
        return all(job.state in TERMINAL for job in await timer_jobs(rig, execution_id))

    await wait_until(finished, timeout=10, what="three ticks")
    execution, state = await rig.executions.load(execution_id)
    assert state.datamodel["ticks"] == 3
    assert execution.step_count == 4
    jobs = await timer_jobs(rig, execution_id)
    assert [job.state for job in jobs] == ["completed"] * 3
    keys = await _keys(rig, execution_id)
    assert keys == {f"job:{job.id}" for job in jobs}


async def test_an_id_whose_earlier_timers_remain_is_not_reused(rig: Rig) -> None:
    # A host that deleted an execution's row and created another under its id got the new
    # one's timers merged with the old rows (unique by (scope, ordinal) in any state): a
    # cancelled old hold meant the new hold was never stored, a pending one fired into the
    # new execution at the old due time.
    execution_id = unique("exe")
    await rig.executions.create(NO_CANCEL, execution_id=execution_id)
    (old,) = await timer_jobs(rig, execution_id)
    assert old.state == "scheduled"
    await execute(rig.server.pool, "DELETE FROM statifier_executions WHERE id = %s", [execution_id])
    with pytest.raises(ExecutionIdNotFree, match="timer jobs of an earlier execution") as refused:
        await rig.executions.create(NO_CANCEL, execution_id=execution_id)
    assert isinstance(refused.value, ExecutionExists)
    assert [job.id for job in await timer_jobs(rig, execution_id)] == [old.id]
    with pytest.raises(ExecutionNotFound):
        await rig.executions.get(execution_id)  # nothing of the refused create was written
    # A finished row holds the key as well.
    await execute(
        rig.server.pool, "UPDATE oban_jobs SET state = 'cancelled' WHERE id = %s", [old.id]
    )
    with pytest.raises(ExecutionIdNotFree):
        await rig.executions.create(NO_CANCEL, execution_id=execution_id)
    await execute(rig.server.pool, "DELETE FROM oban_jobs WHERE id = %s", [old.id])
    await rig.executions.create(NO_CANCEL, execution_id=execution_id)
    (new,) = await timer_jobs(rig, execution_id)
    assert new.id != old.id
    assert new.state == "scheduled"


async def test_a_redelivered_timer_job_changes_the_chart_once(rig: Rig) -> None:
    execution_id = unique("exe")
    await rig.executions.create(TICKER, execution_id=execution_id, datamodel={"limit": 100})
    first = await wait_for_state(
        rig.server.pool, await _first_timer(rig, execution_id), "completed"
    )
    await rig.executions.step(execution_id, Event(name="stop"))
    before, state_before = await rig.executions.load(execution_id)
    assert state_before.active_leaf_ids() == ("stopped",)  # no timer is pending any more
    # oban runs the completed job again, as after a worker killed before its ack.
    await rig.server.oban.retry_job(first.id)
    again = await wait_for_state(rig.server.pool, first.id, "completed", timeout=10)
    assert again.attempt == 2
    after, state = await rig.executions.load(execution_id)
    assert after.step_count == before.step_count  # a second step would count, even unmatched
    assert state.datamodel["ticks"] == state_before.datamodel["ticks"]


async def test_a_timer_into_a_finished_execution_is_discarded(rig: Rig) -> None:
    execution_id = unique("exe")
    await rig.executions.create(NO_CANCEL, execution_id=execution_id)
    (job,) = await timer_jobs(rig, execution_id)
    await rig.executions.step(execution_id, Event(name="finish"))
    await set_due_now(rig.server.pool, job.id)
    row = await wait_for_state(rig.server.pool, job.id, "cancelled")
    assert "discarded: completed" in row.error_text


async def test_cancelling_an_execution_cancels_its_timers_and_a_late_one_is_discarded(
    rig: Rig,
) -> None:
    execution_id = unique("exe")
    await rig.executions.create(NO_CANCEL, execution_id=execution_id)
    (job,) = await timer_jobs(rig, execution_id)
    await rig.executions.cancel(execution_id)
    row = await job_row(rig.server.pool, job.id)
    assert row.state == "cancelled"  # by the cancel's own transaction
    assert "cancelled: the execution was cancelled" in row.error_text
    # A timer the cancel could not reach (already running, or stored by anyone else) is
    # discarded when it fires.
    late = await schedule(rig.config, execution_id, send_delayed(delay_ms=10, ordinal=99))
    row = await wait_for_state(rig.server.pool, late.job_id, "cancelled")
    assert "discarded: cancelled" in row.error_text


async def test_a_timer_of_an_unknown_execution_is_discarded_as_terminated(rig: Rig) -> None:
    job = await schedule(rig.config, unique("ghost"), send_delayed(delay_ms=10))
    row = await wait_for_state(rig.server.pool, job.job_id, "cancelled")
    assert "discarded: terminated" in row.error_text


async def test_a_parked_execution_snoozes_its_timer_until_unparked(rig: Rig) -> None:
    execution_id = unique("exe")
    await rig.executions.create(TICKER, execution_id=execution_id, datamodel={"limit": 1})
    job_id = await _first_timer(rig, execution_id)
    await rig.executions.park(execution_id)

    async def snoozed() -> Any:
        row = await job_row(rig.server.pool, job_id)
        return row if row.meta.get("snoozed") == 1 and row.state == "scheduled" else None

    row = await wait_until(snoozed, timeout=10, what="the timer snoozed")
    assert 55 <= row.seconds_until_scheduled() <= 61
    _, state = await rig.executions.load(execution_id)
    assert state.datamodel["ticks"] == 0

    await rig.executions.unpark(execution_id)
    await set_due_now(rig.server.pool, job_id)
    await wait_for_state(rig.server.pool, job_id, "completed", timeout=10)
    execution, state = await rig.executions.load(execution_id)
    assert (execution.status, state.datamodel["ticks"]) == ("completed", 1)


async def test_a_crash_inside_a_step_leaves_the_old_position_and_no_job(rig: Rig) -> None:
    class Crashing(ObanExecutor):
        async def schedule(
            self, conn: AsyncConnection[Any], execution_id: str, effect: SendDelayed
        ) -> None:
            await super().schedule(conn, execution_id, effect)
            raise RuntimeError("the node died after inserting the timer job")

    executor = Crashing(rig.config)
    assert not executor.timer_batches  # its own schedule is called for every timer
    await _crash_leaves_nothing(rig, Executions(rig.server.pool, executor=executor))


async def test_a_crash_storing_a_steps_timers_leaves_the_old_position_and_no_job(
    rig: Rig,
) -> None:
    class Crashing(ObanExecutor):
        async def store_timers(self, conn: AsyncConnection[Any], timers: Any) -> None:
            await super().store_timers(conn, timers)
            raise RuntimeError("the node died after inserting the timer jobs")

    executor = Crashing(rig.config)
    assert executor.timer_batches
    await _crash_leaves_nothing(rig, Executions(rig.server.pool, executor=executor))


async def _crash_leaves_nothing(rig: Rig, crashing: Executions) -> None:
    execution_id = unique("exe")
    await rig.executions.create(TICKER, execution_id=execution_id, datamodel={"limit": 100})
    job_id = await _first_timer(rig, execution_id)
    await wait_for_state(rig.server.pool, job_id, "completed")
    before, state_before = await rig.executions.load(execution_id)
    jobs_before = await timer_jobs(rig, execution_id)
    with pytest.raises(RuntimeError, match="node died"):
        await crashing.step(execution_id, Event(name="tick"))
    after, state_after = await rig.executions.load(execution_id)
    assert after.step_count == before.step_count
    assert state_after.datamodel == state_before.datamodel
    assert [j.id for j in await timer_jobs(rig, execution_id)] == [j.id for j in jobs_before]


async def test_timers_due_together_are_stepped_in_one_transaction(rig: Rig) -> None:
    """A worker fetches the due timers of several executions at once: their steps share
    one transaction (group commit, ADR 32), each applied once, with its job's key."""
    ids = [unique("grp") for _ in range(6)]
    job_ids = []
    for execution_id in ids:
        await rig.executions.create(NO_CANCEL, execution_id=execution_id)
        job_ids.append(await _first_timer(rig, execution_id))
    await execute(
        rig.server.pool,
        "UPDATE oban_jobs SET scheduled_at = timezone('UTC', now()) WHERE id = ANY(%s)",
        [job_ids],
    )
    for job_id in job_ids:
        await wait_for_state(rig.server.pool, job_id, "completed")
    for execution_id, job_id in zip(ids, job_ids, strict=True):
        execution = await rig.executions.get(execution_id)
        assert execution.status == "completed"
        assert execution.step_count == 2
        assert await _keys(rig, execution_id) == {f"job:{job_id}"}
    async with rig.server.pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT count(DISTINCT xmin::text) FROM statifier_executions WHERE id = ANY(%s)",
            [ids],
        )
        assert await cursor.fetchone() == (1,)


async def test_an_invocation_answers_into_the_execution(rig: Rig) -> None:
    execution_id = unique("exe")
    await rig.executions.create(INVOKING, execution_id=execution_id)

    async def invocation() -> list[Any]:
        return await job_rows(
            rig.server.pool, "worker = %s AND args->>'scope' = %s", [INVOKE_WORKER, execution_id]
        )

    async def answered() -> bool:
        # The invocation's job is acked (in a batch) after the answer's step committed.
        if (await rig.executions.get(execution_id)).status != "completed":
            return False
        return all(job.state in TERMINAL for job in await invocation())

    await wait_until(answered, timeout=10, what="the invocation's answer")
    _, state = await rig.executions.load(execution_id)
    assert state.datamodel["answer"] == {"echo": {"n": 7}}
    (job,) = await invocation()
    assert job.state == "completed"
    assert await _keys(rig, execution_id) == {f"job:{job.id}"}


async def test_a_late_answer_of_an_invocation_no_longer_live_is_discarded(rig: Rig) -> None:
    assert GatedHandler.gate is not None
    assert GatedHandler.started is not None
    execution_id = unique("exe")
    await rig.executions.create(GATED, execution_id=execution_id)
    await wait_until(GatedHandler.started.is_set, timeout=10, what="the handler running")
    stepped = await rig.executions.step(execution_id, Event(name="abort"))
    assert isinstance(stepped, Stepped)
    GatedHandler.gate.set()
    (job,) = await job_rows(
        rig.server.pool, "worker = %s AND args->>'scope' = %s", [INVOKE_WORKER, execution_id]
    )
    row = await wait_for_state(rig.server.pool, job.id, "cancelled", "completed", timeout=10)
    assert row.state == "cancelled"
    assert "discarded: invocation_not_live" in row.error_text
    _, state = await rig.executions.load(execution_id)
    assert state.active_leaf_ids() == ("aborted",)


async def test_an_answer_into_a_parked_execution_is_snoozed_until_unparked(rig: Rig) -> None:
    assert GatedHandler.gate is not None
    assert GatedHandler.started is not None
    execution_id = unique("exe")
    await rig.executions.create(GATED, execution_id=execution_id)
    await wait_until(GatedHandler.started.is_set, timeout=10, what="the handler running")
    await rig.executions.park(execution_id)
    GatedHandler.gate.set()
    (job,) = await job_rows(
        rig.server.pool, "worker = %s AND args->>'scope' = %s", [INVOKE_WORKER, execution_id]
    )

    async def snoozed() -> Any:
        row = await job_row(rig.server.pool, job.id)
        return row if row.meta.get("snoozed") == 1 and row.state == "scheduled" else None

    await wait_until(snoozed, timeout=10, what="the answer snoozed")
    _, state = await rig.executions.load(execution_id)
    assert state.active_leaf_ids() == ("working",)
    await rig.executions.unpark(execution_id)
    await set_due_now(rig.server.pool, job.id)
    await wait_for_state(rig.server.pool, job.id, "completed", timeout=10)
    _, state = await rig.executions.load(execution_id)
    assert state.active_leaf_ids() == ("answered",)


async def test_the_executor_refuses_a_config_that_delivers_into_live_sessions(rig: Rig) -> None:
    with pytest.raises(ConfigError):
        ObanExecutor(Config(oban=rig.server.oban, timers_queue="t"))


def test_the_delivery_is_stored_by_its_path(rig: Rig) -> None:
    assert rig.config.delivery == "statifier_oban.executions:ExecutionDelivery"
    assert isinstance(ExecutionDelivery(), ExecutionDelivery)


async def _first_timer(rig: Rig, execution_id: str) -> int:
    jobs = await timer_jobs(rig, execution_id)
    assert jobs, "no timer job"
    return int(jobs[0].id)


async def _keys(rig: Rig, execution_id: str) -> set[str]:
    async with rig.server.pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT key FROM statifier_step_keys WHERE execution_id = %s", [execution_id]
        )
        return {row[0] for row in await cursor.fetchall()}


STRINGS = chart(
    """
    <datamodel>
      <data id="fired" expr="None"/><data id="answer" expr="None"/><data id="errors" expr="[]"/>
    </datamodel>
    <state id="idle">
      <transition event="arm">
        <send event="fired" delay="100ms"><param name="text" expr="_event.data"/></send>
      </transition>
      <transition event="name"><send eventexpr="_event.data" delay="1h"/></transition>
      <transition event="src" target="invoking"/>
      <transition event="cancel"><cancel sendidexpr="_event.data"/></transition>
      <transition event="ask" target="asking"/>
      <transition event="fired"><assign location="fired" expr="_event.data['text']"/></transition>
      <transition event="error.*">
        <assign location="errors" expr="errors + [_event.name]"/>
      </transition>
    </state>
    <state id="invoking">
      <invoke id="fetch" type="test:echo" srcexpr="_event.data"/>
      <transition event="error.*" target="idle">
        <assign location="errors" expr="errors + [_event.name]"/>
      </transition>
    </state>
    <state id="asking">
      <invoke id="job" type="test:echo"><param name="text" expr="_event.data"/></invoke>
      <transition event="done.invoke.job" target="idle">
        <assign location="answer" expr="_event.data['echo']['text']"/>
      </transition>
    </state>
    """
)


async def test_strings_postgresql_cannot_hold_are_refused_or_stored_exactly(rig: Rig) -> None:
    # Event data comes from anyone (a webhook's JSON may hold "\ud800"); a chart may make
    # an event name or a src of it. Opaque values keep it exactly; a name or a src that
    # jsonb cannot hold is refused, and the chart hears it: the step still commits. No
    # timer has such a send id, so a <cancel> of one cancels nothing.
    execution_id = unique("exe")
    await rig.executions.create(STRINGS, execution_id=execution_id)
    for odd in ("x\x00y", "x\ud800y"):
        for event in ("name", "src", "cancel"):
            stepped = await rig.executions.step(execution_id, Event(name=event, data=odd))
            assert isinstance(stepped, Stepped)
            assert stepped.state.configuration_ids() == ("idle",)
    assert isinstance(stepped, Stepped)
    assert (
        stepped.state.datamodel["errors"]
        == [
            "error.communication",
            "error.communication.invoke.fetch",
        ]
        * 2
    )
    assert await timer_jobs(rig, execution_id) == []
    await rig.executions.step(execution_id, Event(name="arm", data="lone \ud800"))
    await rig.executions.step(execution_id, Event(name="ask", data="lone \udfff"))

    async def answered() -> bool:
        _, state = await rig.executions.load(execution_id)
        return state.datamodel["fired"] is not None and state.datamodel["answer"] is not None

    await wait_until(answered, timeout=10, what="the timer and the answer")
    _, state = await rig.executions.load(execution_id)
    assert (state.datamodel["fired"], state.datamodel["answer"]) == ("lone \ud800", "lone \udfff")


CRASHING = chart(
    """
    <datamodel><data id="failure" expr="None"/></datamodel>
    <state id="idle"><transition event="go" target="working"/></state>
    <state id="working">
      <invoke id="job" type="test:raise"><param name="message" expr="_event.data"/></invoke>
      <transition event="error.communication.invoke.job" target="failed">
        <assign location="failure" expr="_event.data['reason']"/>
      </transition>
    </state>
    <state id="failed"/>
    """
)


async def test_a_job_error_jsonb_cannot_hold_is_recorded_and_jams_no_queue(rig: Rig) -> None:
    # A handler's exception message may carry what an event carried (a NUL, a lone
    # surrogate, megabytes). Its row records it (cut, escaped), and the queue goes on:
    # the acks of every job of the worker are written in one statement.
    crashing = [unique("exe") for _ in range(3)]
    messages = ("nul \x00", "lone \ud800", "x" * 3_000_000)
    for execution_id, message in zip(crashing, messages, strict=True):
        await rig.executions.create(CRASHING, execution_id=execution_id)
        await rig.executions.step(execution_id, Event(name="go", data=message))
    answered = unique("exe")
    await rig.executions.create(INVOKING, execution_id=answered)

    async def settled() -> bool:
        ends = [await configuration_of(rig, i) for i in (*crashing, answered)]
        return ends == [("failed",)] * 3 + [()]

    await wait_until(settled, timeout=15, what="three crashes and one answer recorded")
    rows = await job_rows(
        rig.server.pool,
        "worker = %s AND args->>'scope' = ANY(%s) ORDER BY id",
        [INVOKE_WORKER, crashing],
    )
    assert [row.state for row in rows] == ["discarded"] * 3
    errors = [row.errors[-1]["error"] for row in rows]
    assert "nul \\x00" in errors[0]
    assert "lone \\ud800" in errors[1]
    assert len(errors[2]) < 100_000


async def configuration_of(rig: Rig, execution_id: str) -> tuple[str, ...]:
    """The execution's configuration now."""
    _, state = await rig.executions.load(execution_id)
    return state.configuration_ids()


REENTERED = chart(
    """
    <datamodel><data id="entries" expr="0"/><data id="answer" expr="None"/></datamodel>
    <state id="idle"><transition event="go" target="working"/></state>
    <state id="working">
      <onentry><assign location="entries" expr="entries + 1"/></onentry>
      <invoke id="job" type="test:held">
        <param name="gen" expr="entries"/>
        <param name="gate" expr="'first' if entries == 1 else 'later'"/>
      </invoke>
      <transition event="leave" target="idle"/>
      <transition event="done.invoke.job" target="answered">
        <assign location="answer" expr="_event.data"/>
      </transition>
    </state>
    <state id="answered"/>
    """
)


async def test_an_answer_of_a_left_invocation_never_reaches_its_reentered_state(rig: Rig) -> None:
    # The invoking state is left while its job runs, and entered again: the invoke id is
    # the same, the invocation is another one (SCXML 6.4). The first job's answer is
    # declined; only the second one's is delivered.
    execution_id = unique("exe")
    await rig.executions.create(REENTERED, execution_id=execution_id)
    first = HeldHandler.gates.setdefault("first", asyncio.Event())
    later = HeldHandler.gates.setdefault("later", asyncio.Event())
    await rig.executions.step(execution_id, Event(name="go"))

    async def running() -> bool:
        return [row.state for row in await invoke_jobs(rig, execution_id)] == ["executing"]

    await wait_until(running, timeout=10, what="the first job running")
    await rig.executions.step(execution_id, Event(name="leave"))
    await rig.executions.step(execution_id, Event(name="go"))
    first.set()

    async def first_answered() -> bool:
        return (await invoke_jobs(rig, execution_id))[0].state not in ("executing", "available")

    await wait_until(first_answered, timeout=10, what="the first job's answer")
    _, state = await rig.executions.load(execution_id)
    assert state.configuration_ids() == ("working",)
    assert (await invoke_jobs(rig, execution_id))[0].state == "cancelled"
    later.set()

    async def answered() -> bool:
        return await configuration_of(rig, execution_id) == ("answered",)

    await wait_until(answered, timeout=10, what="the second job's answer")
    _, state = await rig.executions.load(execution_id)
    assert state.datamodel["answer"] == 2


async def invoke_jobs(rig: Rig, execution_id: str) -> list[Any]:
    """The execution's invocation job rows, oldest first."""
    return await job_rows(
        rig.server.pool,
        "worker = %s AND args->>'scope' = %s ORDER BY id",
        [INVOKE_WORKER, execution_id],
    )


async def test_invoke_types_without_a_handler_are_named_before_a_step(oban_client: Any) -> None:
    machine = statifier.compile(
        """<scxml xmlns="http://www.w3.org/2005/07/scxml" initial="a">
  <state id="a">
    <invoke type="myapp:capture"/>
    <invoke type="myapp:refund"/>
    <invoke type="http://www.w3.org/TR/scxml/">
      <content><scxml initial="x"><final id="x"/></scxml></content>
    </invoke>
    <invoke typeexpr="'myapp:' + 'later'"/>
  </state>
</scxml>"""
    )
    config = execution_config(oban_client, timers_queue="timers", invoke_queue="invokes")
    bare = ObanExecutor(config)
    assert bare.unhandled_invoke_types(machine) == ["myapp:capture", "myapp:refund"]
    some = ObanExecutor(config, handlers={"myapp:refund": HeldHandler})
    assert some.unhandled_invoke_types(machine) == ["myapp:capture"]
