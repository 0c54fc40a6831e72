"""Batched acks, the one-statement fetch and the stager that rests until the next due time.

Every test runs real oban servers on real PostgreSQL (``statifier_oban.latency`` is installed
by importing the package). Round trips are counted from libpq's own protocol trace of the
server's pooled connections: one ``ReadyForQuery`` message per round trip.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from oban import telemetry as oban_telemetry
from psycopg import AsyncClientCursor, AsyncConnection
from psycopg_pool import AsyncConnectionPool
from statifier_oban import Config, Delivered, Discarded, Snoozed, latency
from statifier_oban._names import ANNOUNCE_HORIZON_MS, DUE_CHANNEL, TIMER_WORKER
from statifier_oban.store import _acks, _oban_compat, _sql
from statifier_oban.timers import _schedule

from oban_support.common import database_fixture, execute, job_row, wait_until
from oban_support.deliveries import SCRIPTS, ScriptedDelivery
from oban_support.harness import Servers, scope_fixture, send_delayed, servers_fixture

database = database_fixture()
servers = servers_fixture()
scope = scope_fixture("trips")


@contextmanager
def oban_events(*names: str) -> Iterator[list[tuple[float, str, dict[str, Any]]]]:
    """Record oban's own telemetry events ``names`` (monotonic time, name, meta)."""
    seen: list[tuple[float, str, dict[str, Any]]] = []
    handler_id = f"trips-{time.monotonic_ns()}"

    def handler(name: str, meta: dict[str, Any]) -> None:
        seen.append((time.monotonic(), name, dict(meta)))

    oban_telemetry.attach(handler_id, list(names), handler)
    try:
        yield seen
    finally:
        oban_telemetry.detach(handler_id)


async def lateness_s(pool: AsyncConnectionPool, job_id: int) -> float:
    """``attempted_at - scheduled_at`` of a job once it completed (database clock)."""
    row = await wait_for_completed(pool, job_id)
    assert row.attempted_at is not None
    seconds: float = (row.attempted_at - row.scheduled_at).total_seconds()
    return seconds


async def wait_for_completed(pool: AsyncConnectionPool, job_id: int, timeout: float = 8.0) -> Any:
    """The row of job ``job_id`` once completed."""

    async def done() -> Any:
        row = await job_row(pool, job_id)
        return row if row.state == "completed" else None

    return await wait_until(done, timeout=timeout)


# --- batched acks -----------------------------------------------------------------------------


async def test_outcomes_finishing_together_are_acked_in_one_batch_with_oban_s_meaning(
    servers: Servers, scope: str
) -> None:
    server = await servers.start()
    config = server.config(delivery=ScriptedDelivery)
    release = asyncio.Event()
    started: list[int] = []
    answers: dict[int, Any] = {
        1: None,  # Delivered
        2: Discarded("gone"),
        3: Snoozed(60),
        4: RuntimeError("flaky"),
        5: RuntimeError("last attempt"),
    }

    async def script(_scope: str, effect: Any) -> Any:
        started.append(effect.ordinal)
        await release.wait()
        answer = answers[effect.ordinal]
        if isinstance(answer, Exception):
            raise answer
        if answer is None:
            return Delivered()
        return answer

    SCRIPTS[scope] = script
    jobs = await _schedule.schedule_many(
        config, scope, [send_delayed(ordinal=n, send_id=f"t{n}", delay_ms=300) for n in answers]
    )
    ids = {job.ordinal: job.job_id for job in jobs}
    await execute(server.pool, "UPDATE oban_jobs SET max_attempts = 1 WHERE id = %s", [ids[5]])
    with oban_events("oban.producer.ack.stop") as acks:
        await wait_until(lambda: len(started) == len(answers), timeout=8)
        release.set()

        async def settled() -> bool:
            rows = [await job_row(server.pool, job_id) for job_id in ids.values()]
            return all(row.state != "executing" for row in rows)

        await wait_until(settled, timeout=8)
    batches = [meta["count"] for _, _, meta in acks if meta.get("queue") == server.queue]
    assert len(answers) in batches, f"acks of this queue came in batches of {batches}"

    done, cancelled, snoozed, retried, discarded = [
        await job_row(server.pool, ids[n]) for n in sorted(answers)
    ]
    assert done.state == "completed"
    assert done.completed_at is not None
    assert cancelled.state == "cancelled"
    assert cancelled.cancelled_at is not None
    assert "discarded: gone" in cancelled.error_text
    assert snoozed.state == "scheduled"
    assert snoozed.attempt == 0
    assert snoozed.meta.get("snoozed") == 1
    assert 55 < snoozed.seconds_until_scheduled() <= 60
    assert retried.state == "retryable"
    assert retried.attempt == 1
    assert "flaky" in retried.error_text
    assert retried.seconds_until_scheduled() > 10
    assert discarded.state == "discarded"
    assert "last attempt" in discarded.error_text


ATTEMPTED = datetime(2026, 1, 1, 12, 0, 0)
"""When the jobs of the ack tests below were fetched (naive UTC, as the column holds it)."""


async def _attempted_jobs(pool: AsyncConnectionPool, states: list[str]) -> list[int]:
    """Timer jobs in ``states``, each attempted once at ``ATTEMPTED``; their ids."""
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "INSERT INTO oban_jobs (worker, queue, state, attempt, attempted_at, args) "
            "SELECT %s, 'acks', s::oban_job_state, 1, %s, '{}' "
            "FROM unnest(%s::text[]) WITH ORDINALITY AS u (s, n) ORDER BY n RETURNING id",
            [TIMER_WORKER, ATTEMPTED, states],
        )
        return sorted(row[0] for row in await cursor.fetchall())  # ids rise in insert order


async def test_an_ack_applies_only_to_the_attempt_that_was_fetched(
    servers: Servers,
) -> None:
    pool = await servers.pool()
    current, rescued, available = await _attempted_jobs(
        pool, ["executing", "executing", "available"]
    )
    acked = await _acks.write(
        _oban_compat.AckColumns(
            pool=pool,
            prefix="public",
            ids=[current, rescued, available],
            attempted_at=[ATTEMPTED, ATTEMPTED - timedelta(seconds=1), ATTEMPTED],
            states=["completed", "completed", "completed"],
            attempt_changes=[None, None, None],
            schedule_in=[None, None, None],
            errors=[None, None, None],
            metas=[{"recorded": True}, None, None],
        )
    )
    assert acked == [current]
    rows = {job_id: await job_row(pool, job_id) for job_id in (current, rescued, available)}
    assert rows[current].state == "completed"
    assert rows[current].meta == {"recorded": True}
    assert rows[rescued].state == "executing"
    assert rows[available].state == "available"


async def test_acks_that_come_one_at_a_time_keep_one_plan(servers: Servers) -> None:
    # With completed jobs in the table, PostgreSQL's generic plan of "id = ANY" of an
    # array it cannot see looked three times dearer than the custom plan of an array of
    # one, so it planned each lone ack again (planning cost four times the running).
    pool = await servers.pool(max_size=1)  # every statement prepared on one connection
    async with pool.connection() as conn:
        await conn.execute(
            "INSERT INTO oban_jobs (worker, queue, state, args) "
            "SELECT %s, 'acks', 'completed', '{}' FROM generate_series(1, 3000)",
            [TIMER_WORKER],
        )
        await conn.execute("ANALYZE oban_jobs")
    lone = await _attempted_jobs(pool, ["executing"] * 30)
    for job_id in lone:
        acked = await _acks.write(
            _oban_compat.AckColumns(
                pool=pool,
                prefix="public",
                ids=[job_id],
                attempted_at=[ATTEMPTED],
                states=["completed"],
                attempt_changes=[None],
                schedule_in=[None],
                errors=[None],
                metas=[None],
            )
        )
        assert acked == [job_id]
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE %s",
            ["-- Record what oban's executor decided%"],
        )
        [(generic, custom)] = await cursor.fetchall()
    # psycopg prepares a statement at its sixth use; PostgreSQL makes five custom plans.
    assert custom <= 5
    assert generic >= len(lone) - 10


async def test_an_ack_batch_with_a_nan_in_a_recorded_meta_is_still_written(
    servers: Servers,
) -> None:
    # The standard encoder writes NaN, which PostgreSQL refuses: the batch, kept and
    # written again, would block every later ack of the producer.
    pool = await servers.pool()
    first, second = await _attempted_jobs(pool, ["executing", "executing"])
    acked = await _acks.write(
        _oban_compat.AckColumns(
            pool=pool,
            prefix="public",
            ids=[first, second],
            attempted_at=[ATTEMPTED, ATTEMPTED],
            states=["completed", "retryable"],
            attempt_changes=[None, None],
            schedule_in=[None, 30],
            errors=[None, {"attempt": 1, "error": "état: ∞"}],
            metas=[{"recorded": [float("nan"), 0.5]}, None],
        )
    )
    assert sorted(acked) == sorted([first, second])
    done, retried = await job_row(pool, first), await job_row(pool, second)
    assert done.state == "completed"
    assert done.meta == {"recorded": [None, 0.5]}
    assert retried.state == "retryable"
    assert "état: ∞" in retried.error_text


async def test_an_ack_is_led_by_the_primary_key_when_the_state_index_is_full_of_dead_rows(
    servers: Servers,
) -> None:
    # A burst as the planner sees it: statistics taken while few rows were executing, then
    # thousands of rows executed and completed (each leaves a dead 'executing' entry in
    # oban's state index until vacuum). The ack must still find its rows by id, in a
    # custom plan and in the generic plan a prepared statement settles on.
    pool = await servers.pool()
    async with pool.connection() as conn:
        await conn.execute("ALTER TABLE oban_jobs SET (autovacuum_enabled = false)")
        await conn.execute(
            "INSERT INTO oban_jobs (worker, queue, state, args) "
            "SELECT %s, 'acks', 'scheduled', '{}' FROM generate_series(1, 3000)",
            [TIMER_WORKER],
        )
        await conn.commit()
        await conn.execute("ANALYZE oban_jobs")
        await conn.execute(
            "UPDATE oban_jobs SET state = 'executing', attempt = 1, "
            "attempted_at = timezone('UTC', now())"
        )
        await conn.execute("UPDATE oban_jobs SET state = 'completed' WHERE id > 20")
        await conn.commit()
        rows = await (
            await conn.execute("SELECT id, attempted_at FROM oban_jobs WHERE id <= 20")
        ).fetchall()
        acks = [
            {"id": job_id, "attempted_at": at.isoformat(), "state": "completed"}
            for job_id, at in rows
        ]
        # A batch, and a batch of one (its id alone, acked_id.sql).
        for acked, batch, ids in (
            ("ids", acks, [job_id for job_id, _ in rows]),
            ("id", acks[:1], rows[0][0]),
        ):
            statement = _sql.statement("ack_jobs", "public", acked=acked)
            prepared = statement.replace("%(acks)s", "$1").replace(f"%({acked})s", "$2")
            await conn.execute(f"PREPARE ack_{acked} AS {prepared}")
            for mode in ("force_custom_plan", "force_generic_plan"):
                await conn.execute(f"SET plan_cache_mode = {mode}")
                explain = AsyncClientCursor(conn)
                await explain.execute(
                    f"EXPLAIN (FORMAT JSON) EXECUTE ack_{acked}(%s, %s)",
                    [json.dumps(batch), ids],
                )
                plan = json.dumps((await explain.fetchone() or [None])[0])
                assert '"Index Name": "oban_jobs_pkey"' in plan, (acked, mode, plan)
                assert "oban_jobs_state_queue_priority_scheduled_at_id_index" not in plan, mode
        await conn.rollback()


# --- the stager and the fetch -----------------------------------------------------------------


async def test_the_stager_rests_until_the_next_due_time(servers: Servers, scope: str) -> None:
    server = await servers.start(stager={})  # the default interval: rests up to 1 s
    stager = _oban_compat.stager_of(server.oban)
    assert isinstance(stager, latency.PromptStager)
    assert _oban_compat.interval_of(stager) == latency.DEFAULT_INTERVAL_S == 1.0
    config = server.config(delivery=ScriptedDelivery)
    await asyncio.sleep(0.3)
    with oban_events("oban.stager.stage.stop") as rounds:
        began = time.monotonic()
        # Announced (due within the horizon) and found by a round (due beyond it).
        soon = await _schedule.schedule(config, scope, send_delayed(ordinal=1, delay_ms=400))
        later = await _schedule.schedule(
            config, scope, send_delayed(ordinal=2, send_id="later", delay_ms=2300)
        )
        late_soon = await lateness_s(server.pool, soon.job_id)
        late_later = await lateness_s(server.pool, later.job_id)
        elapsed = time.monotonic() - began
    assert late_soon < 0.25, f"the announced timer was picked up {late_soon:.3f} s late"
    assert late_later < 0.25, f"the later timer was picked up {late_later:.3f} s late"
    # A poll every 0.1 s would have made about 24 rounds; resting until the next due time
    # (at most 1 s) makes a round per second plus one per due time.
    assert len(rounds) <= elapsed + 5, f"{len(rounds)} staging rounds in {elapsed:.1f} s"


TRACE_LINE = re.compile(r"^(\S+ \S+)\t([BF])\t\d+\t(\w+)")


OURS = {
    "stage": "-- The prompt stager's step",
    "fetch": "-- A producer's fetch",
    "ack": "-- Record what oban's executor decided",
}
"""Our statements, by the first words of their text."""


class Traced:
    """A pool whose connections write libpq's protocol trace to files, with timestamps.

    Statements are never prepared on it, so every round trip shows its statement's text.
    """

    def __init__(self, url: str, directory: Path) -> None:
        self.directory = directory
        self.connections: list[AsyncConnection[Any]] = []
        self.files: list[Any] = []
        self.pool = AsyncConnectionPool(
            url,
            open=False,
            min_size=1,
            max_size=5,
            configure=self._trace,
            kwargs={"prepare_threshold": None},
        )

    async def _trace(self, conn: AsyncConnection[Any]) -> None:
        file = (self.directory / f"conn-{len(self.files)}.trace").open("w")
        self.files.append(file)
        self.connections.append(conn)
        conn.pgconn.trace(file.fileno())

    def round_trips(self, since: datetime, until: datetime) -> list[list[str]]:
        """Per connection, the round trips in the window, each named by its statement:
        ``stage``, ``fetch``, ``ack`` (ours) or the statement's first words. Untraces."""
        for conn in self.connections:
            if not conn.closed:
                conn.pgconn.untrace()
        for file in self.files:
            file.close()
        found: list[list[str]] = []
        for path in sorted(self.directory.glob("*.trace")):
            trips: list[str] = []
            first: str | None = None
            for line in path.read_text().splitlines():
                match = TRACE_LINE.match(line)
                if match is None:
                    continue
                if not since <= datetime.fromisoformat(match.group(1)) <= until:
                    continue
                direction, message = match.group(2), match.group(3)
                if direction == "F" and first is None:
                    text = line.split("\t", 4)[-1].lstrip(' "')
                    first = next((k for k, v in OURS.items() if v in text), text[:40])
                if direction == "B" and message == "ReadyForQuery":
                    trips.append(first or "?")
                    first = None
            found.append(trips)
        return found


@pytest_asyncio.fixture
async def traced(database: str, servers: Servers, tmp_path: Path) -> Traced:
    """A traced pool on the module's database, closed with ``servers`` (after its Obans)."""
    found = Traced(database, tmp_path)
    await found.pool.open(wait=True)
    servers.pools.append(found.pool)
    return found


async def test_a_sparse_timer_costs_three_round_trips(
    servers: Servers, scope: str, traced: Traced
) -> None:
    server = await servers.start(pool=traced.pool, stager={})
    client = await servers.build()  # schedules on a pool of its own (not traced)
    config = Config(oban=client.oban, timers_queue=server.queue, delivery=ScriptedDelivery)
    await asyncio.sleep(0.3)
    job = await _schedule.schedule(config, scope, send_delayed(ordinal=1, delay_ms=600))
    await asyncio.sleep(0.4)
    since = datetime.now()
    await wait_for_completed(client.pool, job.job_id)
    await asyncio.sleep(0.3)  # the producer's wake-up after the completion, and its ack
    until = datetime.now()
    per_connection = traced.round_trips(since, until)
    trips = [trip for trips in per_connection for trip in trips]
    # The staging round at the due time (and a periodic one at most: the interval is 1 s),
    # one fetch, one ack: no empty re-fetch after the ack...
    assert trips.count("fetch") == 1, per_connection
    assert trips.count("ack") == 1, per_connection
    assert 1 <= trips.count("stage") <= 2, per_connection
    # ...and none of them inside a transaction of its own (oban's housekeeping, such as
    # the leader's lease, still brackets its statements).
    for trips in per_connection:
        for before, after in itertools.pairwise(trips):
            assert not (before == "BEGIN" and after in OURS), per_connection


@pytest.mark.parametrize("announced", [True, False])
async def test_a_timer_scheduled_in_a_long_transaction_fires_once_committed(
    servers: Servers, scope: str, announced: bool
) -> None:
    server = await servers.start(stager={})
    config = server.config(delivery=ScriptedDelivery)
    await asyncio.sleep(0.2)
    async with server.pool.connection() as conn:
        job = await _schedule.schedule(
            config, scope, send_delayed(delay_ms=200 if announced else 1200), conn=conn
        )
        await asyncio.sleep(1.5)  # committed after the timer was due
    committed = datetime.now(UTC).replace(tzinfo=None)
    row = await wait_for_completed(server.pool, job.job_id)
    assert row.attempted_at is not None
    # Due before it existed for anyone else: fired right after the commit. Unannounced,
    # a stager round (at most 1 s apart) finds it.
    bound = 0.3 if announced else 1.3
    assert (row.attempted_at - committed).total_seconds() < bound


async def test_a_schedule_announces_its_earliest_timer_due_within_the_horizon_once(
    servers: Servers, database: str, scope: str
) -> None:
    client = await servers.build()
    config = client.config(delivery=ScriptedDelivery)
    channel = f"public.oban_{DUE_CHANNEL}"
    async with await AsyncConnection.connect(database, autocommit=True) as listener:
        await listener.execute(f'LISTEN "{channel}"')
        soon = await _schedule.schedule_many(
            config,
            scope,
            [
                send_delayed(ordinal=1, send_id="a", delay_ms=5000),
                send_delayed(ordinal=2, send_id="b", delay_ms=300),
                send_delayed(ordinal=3, send_id="c", delay_ms=600),
            ],
        )
        await _schedule.schedule_many(  # nothing due within the horizon: no announcement
            config, scope, [send_delayed(ordinal=4, send_id="d", delay_ms=ANNOUNCE_HORIZON_MS)]
        )
        await _schedule.schedule_many(config, scope, [soon_effect := send_delayed(ordinal=2)])
        single = await _schedule.schedule(
            config, scope, send_delayed(ordinal=5, send_id="e", delay_ms=200)
        )
        payloads = [json.loads(note.payload) async for note in listener.notifies(timeout=0.5)]
    assert soon_effect.ordinal == 2  # a replay (a conflict) inserts nothing: no announcement
    earliest = soon[1].scheduled_at.replace(tzinfo=UTC).timestamp()
    assert [p["queue"] for p in payloads] == [client.queue, client.queue]
    assert abs(payloads[0]["at"] - earliest) < 1e-5
    assert abs(payloads[1]["at"] - single.scheduled_at.replace(tzinfo=UTC).timestamp()) < 1e-5
