"""The durable drivers deliver what the other drivers do.

The charts of ``tests/drivers/agreement.py`` run on the virtual driver, on a live
``Session`` with ``DurableTimers`` on a real oban queue (the delayed send to self becomes a
job, fires through ``SessionDelivery``), and as a durable execution (``Executions`` on
PostgreSQL, its timer a job that ``ExecutionDelivery`` steps in); the events the
execution dequeues must be identical, ``caller_context`` included.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
import statifier
from psycopg_pool import AsyncConnectionPool
from statifier.core import effects as fx
from statifier.runtime.session import Message, Session
from statifier.virtual import VirtualDriver
from statifier_oban import Config, DurableTimers, executions
from statifier_oban.executions import ObanExecutor, execution_config
from statifier_persistence import Executions, Stepped

from oban_support.common import StartOban, wait_until
from tests.drivers.agreement import CHARTS, CONTEXT, SESSION, delivered


def run_virtual(source: str) -> list[tuple[Any, ...]]:
    driver = VirtualDriver(
        statifier.compile(source), session_id=SESSION, trace=True, caller_context=CONTEXT
    )
    driver.start()
    driver.advance()
    assert any(isinstance(effect, fx.Done) for effect in driver.effects)
    return delivered(driver.effects)


@pytest.mark.parametrize("name", sorted(CHARTS))
async def test_durable_timers_deliver_what_the_virtual_driver_delivers(
    name: str, start_oban: StartOban, pool: AsyncConnectionPool
) -> None:
    oban = await start_oban({"timers": 5})
    seen: list[fx.Effect] = []
    scheduled: list[fx.SendDelayed] = []

    def collect(_: str, message: Message) -> None:
        if isinstance(message, fx.Effect):
            seen.append(message)
            if isinstance(message, fx.SendDelayed) and message.target is None:
                scheduled.append(message)

    session = await Session.start(
        statifier.compile(CHARTS[name]),
        session_id=SESSION,
        trace=True,
        caller_context=CONTEXT,
        subscribers=[collect],
        delayed_sends=DurableTimers(Config(oban=oban, timers_queue="timers")),
    )
    try:
        await asyncio.wait_for(session.wait_halted(), timeout=15)
    finally:
        await session.stop()
    # The comparison only means something if each send to self really went through a job.
    expected = [(effect.event, "completed") for effect in scheduled]

    async def jobs() -> list[tuple[Any, ...]]:
        async with pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT args->>'event', state FROM oban_jobs WHERE args->>'scope' = %s ORDER BY id",
                (SESSION,),
            )
            return await cursor.fetchall()

    async def acknowledged() -> bool:
        # oban records a job completed after its delivery returned (acks are batched).
        return await jobs() == expected

    with contextlib.suppress(AssertionError):  # the assertion below shows the difference
        await wait_until(acknowledged, what="the timer jobs completed")
    assert await jobs() == expected
    if name == "caller_context":
        assert [effect.event for effect in scheduled] == ["tick"]
    assert delivered(seen) == run_virtual(CHARTS[name])


@pytest.mark.parametrize("name", sorted(CHARTS))
async def test_a_durable_execution_delivers_what_the_virtual_driver_delivers(
    name: str, start_oban: StartOban, pool: AsyncConnectionPool
) -> None:
    """Each chart as an execution. Caller context: both delayed sends (to itself, and to
    ``#_internal``) are jobs, routed when they fire. Invoke: the child is an execution,
    and its ``hello``, the parent's ``go`` and its ``done`` are messages, each delivered
    by a job (``MessageWorker``)."""
    oban = await start_oban({"timers": 5})
    steps: list[Stepped] = []
    store = Executions(
        pool,
        executor=ObanExecutor(execution_config(oban, timers_queue="timers")),
        observer=steps.append,
    )
    executions.use(store)
    try:
        await store.create(
            statifier.compile(CHARTS[name]),
            execution_id=SESSION,
            caller_context=CONTEXT,
            trace=True,
        )

        async def finished() -> bool:
            return (await store.get(SESSION)).status == "completed"

        await wait_until(finished, timeout=15, what="the execution completing")
    finally:
        executions.use(None)
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT worker, args->>'event', args->>'target' FROM oban_jobs ORDER BY id"
        )
        jobs = await cursor.fetchall()
    if name == "caller_context":
        timer = "statifier_oban.workers.TimerWorker"
        assert jobs == [(timer, "tick", None), (timer, "inner", "#_internal")]
    else:
        message = "statifier_oban.executions.MessageWorker"
        assert jobs == [(message, None, None)] * 3  # hello, go, done.invoke.kid
    seen = [effect for step in steps if step.execution.id == SESSION for effect in step.effects]
    assert delivered(seen) == run_virtual(CHARTS[name])
