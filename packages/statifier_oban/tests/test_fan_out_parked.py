"""A fan-out whose parent is parked before its child starts run (ADR 17, its amendment).

A parked parent takes no child, so each start snoozes, as the parent's timers and
messages do, keeping its attempts: parked for a month, the starts are still there, and
once the parent is unparked they run and the fan-out settles. The test runs on a
``DurableEnv``: a month passes in one ``advance``.
"""

from __future__ import annotations

from typing import Any

import statifier
from statifier_oban import executions as execution_jobs
from statifier_oban.children import MapHandler
from statifier_oban.testing import DurableEnv
from statifier_oban.workers import CHILD_START_WORKER

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python"'

KID = statifier.compile(
    f"""<scxml {NS} name="parked_kid" initial="k">
  <datamodel><data id="item" expr="None"/></datamodel>
  <state id="k"><transition target="done"/></state>
  <final id="done"><donedata><param name="n" expr="item"/></donedata></final>
</scxml>"""
)

BATCH = statifier.compile(
    f"""<scxml {NS} name="parked_batch" initial="mapping">
  <datamodel><data id="orders" expr="[1, 2]"/><data id="mapped" expr="None"/></datamodel>
  <state id="mapping">
    <invoke id="m" type="statifier:map">
      <param name="items" expr="orders"/><param name="chart" expr="'parked_kid'"/>
    </invoke>
    <transition event="done.invoke.m" target="mapped">
      <assign location="mapped" expr="_event.data"/>
    </transition>
  </state>
  <final id="mapped"/>
</scxml>"""
)

PARKED_SNOOZE_S = 6 * 3600
"""Long enough to keep the month's snoozes few, far shorter than oban's backoff after
its first retries (a retry with backoff spends all 20 attempts within the month)."""


async def start_jobs(env: DurableEnv) -> list[tuple[Any, ...]]:
    """``(state, attempt, max_attempts)`` of every child start job, oldest first."""
    async with env.pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT state::text, attempt, max_attempts FROM oban_jobs"
            " WHERE worker = %s ORDER BY id",
            [CHILD_START_WORKER],
        )
        return list(await cursor.fetchall())


async def test_a_parked_parents_child_starts_wait_for_it_and_the_fan_out_settles(
    statifier_database_url: str,
) -> None:
    handlers = {"statifier:map": MapHandler}
    async with DurableEnv.open(statifier_database_url, handlers=handlers) as env:
        execution_jobs.use(env.executions, parked_snooze_s=PARKED_SNOOZE_S)
        await env.executions.register(KID)
        await env.executions.create(BATCH, execution_id="batch")
        # The map's invocation job is due, not run: parked now, its child starts (stored
        # when it runs) find the parent parked.
        await env.executions.park("batch")

        ran = await env.advance("30d")
        starts = [job for job in ran if job.kind == "child start"]
        assert {job.outcome for job in starts} == {"scheduled"}  # each a snooze
        assert len(starts) >= 2 * 100  # each start asked again all month
        assert [job.outcome for job in ran if job.kind != "child start"] == ["completed"]
        assert await start_jobs(env) == [("scheduled", 0, 20), ("scheduled", 0, 20)]
        assert (await env.executions.list(parent="batch")).executions == ()

        await env.executions.unpark("batch")
        ran = await env.advance(f"{PARKED_SNOOZE_S}s")
        assert sorted(job.kind for job in ran) == ["child start", "child start", "settlement"]
        await env.assert_done("batch", "mapped")
        await env.assert_datamodel("batch", mapped=[{"n": 1}, {"n": 2}])
        (fan_out,) = await env.executions.fan_outs("batch")
        assert (fan_out.count, fan_out.finished, fan_out.state) == (2, 2, "settled")
