"""The schema against a real PostgreSQL: install, verify, the two timer indexes, fixtures."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import psycopg
import pytest
from oban import Job, Oban, worker
from oban.schema import install_sql as oban_install_sql
from psycopg import AsyncClientCursor, AsyncConnection
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.errors import InvalidColumnReference, UniqueViolation
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from statifier_oban._names import TIMER_WORKER
from statifier_oban.embedded import EmbeddedPostgres
from statifier_oban.schema import (
    INDEXES,
    OBAN_TABLES,
    SESSION_LEASES,
    TIMER_DEDUP_INDEX,
    TIMER_PENDING_INDEX,
    SchemaError,
    check_prefix,
    install,
    install_sql,
    timer_indexes_sql,
    verify,
)
from statifier_persistence.schema import TABLES as PERSISTENCE_TABLES
from statifier_persistence.schema import install_sql as install_persistence_sql

ALL_PIECES = [*OBAN_TABLES, SESSION_LEASES, *PERSISTENCE_TABLES, *INDEXES]
"""What ``verify`` checks, in its order (statifier_persistence is installed here)."""
ALL_STATES = [
    "available",
    "scheduled",
    "suspended",
    "executing",
    "retryable",
    "completed",
    "discarded",
    "cancelled",
]
OTHER_WORKER = "statifier_oban.workers.SomethingElse"

INSERT_JOB = """
INSERT INTO oban_jobs (worker, queue, args, state)
VALUES (%(worker)s, 'timers', %(args)s, %(state)s::oban_job_state)
RETURNING id
"""

CANCEL = """
UPDATE oban_jobs SET state = 'cancelled'
WHERE worker = %(worker)s AND args->>'scope' = %(scope)s AND args->>'send_id' = %(send_id)s
  AND state IN ('scheduled', 'available', 'retryable')
"""


async def connect(url: str) -> AsyncConnection[Any]:
    """An autocommit connection to ``url``."""
    return await AsyncConnection.connect(url, autocommit=True)


async def insert_job(
    conn: AsyncConnection[Any],
    *,
    scope: str = "s1",
    ordinal: int = 1,
    state: str = "scheduled",
    worker: str = TIMER_WORKER,
    send_id: str = "t1",
) -> int:
    """Insert one job row with timer-shaped args; returns its id."""
    args = Jsonb({"scope": scope, "ordinal": ordinal, "send_id": send_id})
    cursor = await conn.execute(INSERT_JOB, {"worker": worker, "args": args, "state": state})
    row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


async def fetch_all(conn: AsyncConnection[Any], query: Any, params: Any = None) -> list[Any]:
    """All rows of ``query``."""
    return await (await conn.execute(query, params)).fetchall()


# --- install / verify ---------------------------------------------------------------------


async def test_install_into_empty_database_is_idempotent(make_database: Any) -> None:
    url = make_database("template0")
    assert await verify(url) == ALL_PIECES

    await install(url)
    await install(url)  # second run: no error, nothing changes

    assert await verify(url) == []
    async with await connect(url) as conn:
        rows = await fetch_all(
            conn,
            "SELECT indexname FROM pg_indexes WHERE tablename = 'oban_jobs' "
            "AND indexname LIKE 'statifier_oban_%' ORDER BY 1",
        )
    assert [name for (name,) in rows] == sorted(INDEXES)


async def test_install_on_the_installed_template_copy_is_a_no_op(database_url: str) -> None:
    assert await verify(database_url) == []
    await install(database_url)
    assert await verify(database_url) == []


async def test_verify_reports_our_indexes_missing_next_to_obans_schema(
    make_database: Any,
) -> None:
    url = make_database("template0")
    async with await connect(url) as conn:
        await conn.execute(oban_install_sql())  # oban's own schema only

    assert await verify(url) == [SESSION_LEASES, *PERSISTENCE_TABLES, *INDEXES]


async def test_verify_reports_a_dropped_index(database_url: str) -> None:
    async with await connect(database_url) as conn:
        await conn.execute(f"DROP INDEX {TIMER_PENDING_INDEX}")

    assert await verify(database_url) == [TIMER_PENDING_INDEX]


async def test_install_and_verify_through_a_pool(make_database: Any) -> None:
    url = make_database("template0")
    async with AsyncConnectionPool(url, open=False, min_size=1, max_size=2) as pool:
        await install(pool)
        assert await verify(pool) == []


async def test_install_in_the_callers_transaction_restores_its_settings(
    database_url: str,
) -> None:
    show = "SELECT current_setting('search_path'), current_setting('client_min_messages')"
    async with await AsyncConnection.connect(database_url) as conn:
        async with conn.transaction(force_rollback=True):
            await conn.execute("SET LOCAL search_path = pg_catalog, public")
            before = await fetch_all(conn, show)
            await install(conn, prefix="tenant_tx")
            assert await verify(conn, prefix="tenant_tx") == []
            assert await fetch_all(conn, show) == before
        # it ran inside the caller's transaction, so it is rolled back with it
        assert await verify(conn, prefix="tenant_tx") == ALL_PIECES


def test_install_sql_is_obans_sql_followed_by_ours() -> None:
    text = install_sql("tenant")
    assert text.startswith(oban_install_sql("tenant").rstrip())
    assert timer_indexes_sql("tenant") in text
    assert f"CREATE UNIQUE INDEX IF NOT EXISTS {TIMER_DEDUP_INDEX}\n" in text
    assert f"WHERE worker = '{TIMER_WORKER}';" in text
    assert "state IN ('scheduled', 'available', 'retryable')" in text
    assert "ON tenant.oban_jobs ((args->>'scope'), (args->>'ordinal'))" in text
    ours = text.removeprefix(oban_install_sql("tenant").rstrip())
    assert re.search(r"\{[a-z_]+\}", ours) is None  # no placeholder left unfilled
    assert install_persistence_sql("tenant") in ours  # the execution tables come along


@pytest.mark.parametrize(
    "prefix",
    ["", "Public", "1abc", "a-b", "a b", 'x"; DROP TABLE t; --', "select", "user", "a" * 64],
)
async def test_a_prefix_that_is_not_a_plain_identifier_is_rejected(prefix: str) -> None:
    with pytest.raises(ValueError, match="schema prefix"):
        check_prefix(prefix)
    with pytest.raises(ValueError, match="schema prefix"):
        install_sql(prefix)
    with pytest.raises(ValueError, match="schema prefix"):  # before any connection attempt
        await install("host=/nonexistent-statifier dbname=x", prefix=prefix)


def test_plain_prefixes_are_accepted() -> None:
    for prefix in ("public", "tenant_a", "_x1", "a" * 63, "analyze_jobs"):
        assert check_prefix(prefix) == prefix


async def test_install_rejects_an_unknown_target_type() -> None:
    with pytest.raises(TypeError, match="conninfo string"):
        await install(42)  # type: ignore[arg-type]


# --- unreachable database -----------------------------------------------------------------

UNREACHABLE = [
    make_conninfo(host="/nonexistent-statifier-socket-dir", port=5432, dbname="x", user="x"),
    make_conninfo(host="127.0.0.1", port=1, dbname="x", user="x", connect_timeout=2),
]


@pytest.mark.parametrize("url", UNREACHABLE, ids=["socket", "tcp"])
async def test_an_unreachable_url_raises_schema_error(url: str) -> None:
    with pytest.raises(SchemaError, match="cannot connect") as install_error:
        await install(url)
    assert isinstance(install_error.value.__cause__, psycopg.OperationalError)
    assert "\n" not in str(install_error.value)

    with pytest.raises(SchemaError) as verify_error:
        await verify(url)
    assert isinstance(verify_error.value.__cause__, psycopg.OperationalError)


async def test_a_pool_that_cannot_connect_raises_schema_error() -> None:
    pool = AsyncConnectionPool(UNREACHABLE[0], open=False, min_size=1, timeout=0.3)
    await pool.open(wait=False)
    try:
        with pytest.raises(SchemaError, match="pool") as error:
            await install(pool)
        assert isinstance(error.value.__cause__, PoolTimeout)
    finally:
        await pool.close()


# --- non-public prefix --------------------------------------------------------------------


async def test_a_non_public_prefix_installs_into_its_own_schema(
    database_url: str, pool: AsyncConnectionPool, start_oban: Any
) -> None:
    # public already holds oban's schema (the template), which is what trips oban 0.7.0.
    async with await connect(database_url) as conn:
        with pytest.raises(psycopg.errors.UndefinedObject, match=r"tenant_a\.oban_job_state"):
            await conn.execute("CREATE SCHEMA tenant_a; " + oban_install_sql("tenant_a"))

    await install(database_url, prefix="tenant_a")

    assert await verify(database_url, prefix="tenant_a") == []
    async with await connect(database_url) as conn:
        owned = await fetch_all(
            conn,
            """
            SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'tenant_a' AND c.relname = ANY(%s)
            UNION ALL SELECT t.typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
            WHERE n.nspname = 'tenant_a' AND t.typname = 'oban_job_state'
            UNION ALL SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = 'tenant_a' AND p.proname = 'oban_count_estimate'
            """,
            [ALL_PIECES],
        )
    assert sorted(name for (name,) in owned) == sorted(
        [*ALL_PIECES, "oban_job_state", "oban_count_estimate"]
    )

    # oban itself works against it: a server starts its queues there and inserts there.
    node = await start_oban({"tenant_q": 1}, prefix="tenant_a")
    await node.enqueue(
        Job(TIMER_WORKER, queue="elsewhere", args={"scope": "s", "ordinal": 1}, scheduled_in=60)
    )
    async with await connect(database_url) as conn:
        counts = await fetch_all(
            conn, "SELECT (SELECT count(*) FROM tenant_a.oban_jobs), count(*) FROM oban_jobs"
        )
    assert counts == [(1, 0)]


# --- the dedup index ----------------------------------------------------------------------


@pytest.mark.parametrize("state", ALL_STATES)
async def test_dedup_index_rejects_a_second_timer_row_in_any_state(
    database_url: str, state: str
) -> None:
    async with await connect(database_url) as conn:
        job_id = await insert_job(conn, scope="s1", ordinal=7)
        await conn.execute(
            "UPDATE oban_jobs SET state = %s::oban_job_state WHERE id = %s", [state, job_id]
        )
        with pytest.raises(UniqueViolation) as error:
            await insert_job(conn, scope="s1", ordinal=7, send_id="another")
    assert error.value.diag.constraint_name == TIMER_DEDUP_INDEX


async def test_dedup_index_holds_for_oban_enqueue_after_completion(
    database_url: str, oban_client: Oban
) -> None:
    job = await oban_client.enqueue(
        Job(TIMER_WORKER, queue="timers", args={"scope": "s1", "ordinal": 1}, scheduled_in=60)
    )
    async with await connect(database_url) as conn:
        await conn.execute(
            "UPDATE oban_jobs SET state = 'completed', completed_at = now() WHERE id = %s",
            [job.id],
        )
    with pytest.raises(UniqueViolation):
        await oban_client.enqueue(Job(TIMER_WORKER, args={"scope": "s1", "ordinal": 1}))


async def test_dedup_index_allows_the_same_pair_for_another_worker_or_ordinal(
    database_url: str,
) -> None:
    async with await connect(database_url) as conn:
        await insert_job(conn, scope="s1", ordinal=1)
        await insert_job(conn, scope="s1", ordinal=1, worker=OTHER_WORKER)
        await insert_job(conn, scope="s1", ordinal=1, worker=OTHER_WORKER)
        await insert_job(conn, scope="s1", ordinal=2)
        await insert_job(conn, scope="s2", ordinal=1)
        rows = await fetch_all(conn, "SELECT count(*) FROM oban_jobs")
    assert rows == [(5,)]


async def test_on_conflict_infers_the_dedup_index_only_with_a_literal_worker(
    database_url: str,
) -> None:
    """ON CONFLICT must repeat the index predicate as a constant (psycopg prepares
    statements after 5 runs and PostgreSQL may then use a generic plan, where a
    ``worker = $n`` parameter cannot prove the partial index's predicate)."""
    # A constant worker name, a literal on purpose: that is what this test checks.
    literal = f"""
        INSERT INTO oban_jobs (worker, args, state) VALUES (%s, %s, 'scheduled')
        ON CONFLICT ((args->>'scope'), (args->>'ordinal')) WHERE worker = '{TIMER_WORKER}'
        DO NOTHING RETURNING id"""  # noqa: S608 - see the line above
    parameter = """
        INSERT INTO oban_jobs (worker, args, state) VALUES (%s, %s, 'scheduled')
        ON CONFLICT ((args->>'scope'), (args->>'ordinal')) WHERE worker = %s
        DO NOTHING RETURNING id"""
    args = Jsonb({"scope": "s1", "ordinal": 1})
    async with await connect(database_url) as conn:
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        first = await fetch_all(conn, literal, [TIMER_WORKER, args])
        again = await conn.execute(literal, [TIMER_WORKER, args], prepare=True)
        assert len(first) == 1
        assert await again.fetchall() == []  # the duplicate is skipped, no error
        with pytest.raises(InvalidColumnReference, match="ON CONFLICT"):
            await conn.execute(parameter, [TIMER_WORKER, args, TIMER_WORKER], prepare=True)


# --- the pending index --------------------------------------------------------------------


async def load_rows(conn: AsyncConnection[Any], count: int = 5000) -> None:
    """``count`` rows: 3/4 timer rows (500 scopes, 7 send ids, mixed states), 1/4 others."""
    await conn.execute(
        """
        INSERT INTO oban_jobs (worker, queue, args, state)
        SELECT CASE WHEN g %% 4 = 0 THEN %(other)s ELSE %(timer)s END, 'timers',
               jsonb_build_object(
                   'scope', 'scope-' || (g %% 500), 'ordinal', g, 'send_id', 'send-' || (g %% 7)),
               (ARRAY['scheduled', 'available', 'retryable', 'executing', 'completed',
                      'cancelled', 'discarded'])[1 + g %% 7]::oban_job_state
        FROM generate_series(1, %(count)s) AS g
        """,
        {"other": OTHER_WORKER, "timer": TIMER_WORKER, "count": count},
    )
    await conn.execute("ANALYZE oban_jobs")


async def plan_text(conn: AsyncConnection[Any], query: Any, params: Any = None) -> str:
    """EXPLAIN output of ``query`` with parameters bound client-side, as one string."""
    cursor = AsyncClientCursor(conn)
    await cursor.execute(b"EXPLAIN " + query.encode(), params)
    return "\n".join(row[0] for row in await cursor.fetchall())


async def test_cancel_by_scope_and_send_id_uses_the_pending_index(database_url: str) -> None:
    async with await connect(database_url) as conn:
        await load_rows(conn)
        plan = await plan_text(
            conn, CANCEL, {"worker": TIMER_WORKER, "scope": "scope-3", "send_id": "send-3"}
        )
    assert TIMER_PENDING_INDEX in plan, plan


async def test_a_generic_plan_uses_the_pending_index_only_with_a_literal_worker(
    database_url: str,
) -> None:
    literal = CANCEL.replace("%(worker)s", f"'{TIMER_WORKER}'")
    literal = literal.replace("%(scope)s", "$1").replace("%(send_id)s", "$2")
    parameter = CANCEL.replace("%(worker)s", "$1")
    parameter = parameter.replace("%(scope)s", "$2").replace("%(send_id)s", "$3")
    async with await connect(database_url) as conn:
        await load_rows(conn)
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        await conn.execute(f"PREPARE literal_cancel AS {literal}")
        await conn.execute(f"PREPARE parameter_cancel AS {parameter}")
        with_literal = await plan_text(conn, "EXECUTE literal_cancel('scope-3', 'send-3')")
        with_parameter = await plan_text(
            conn, "EXECUTE parameter_cancel(%s, 'scope-3', 'send-3')", [TIMER_WORKER]
        )
    assert TIMER_PENDING_INDEX in with_literal, with_literal
    assert TIMER_PENDING_INDEX not in with_parameter, with_parameter


async def test_the_planner_knows_that_a_scope_holds_few_jobs(database_url: str) -> None:
    """40,000 timer rows of 20,000 scopes, analysed: the generic plan of a scope's jobs
    (what a prepared statement runs) expects a couple of rows. Without the statistics of
    ``args->>'scope'`` it expects 0.5% of the table (200 here, 5,000 of a million), and
    PostgreSQL, finding that costlier than a plan for the value at hand, plans every
    execution again (ADR 32)."""
    async with await connect(database_url) as conn:
        await conn.execute(
            "INSERT INTO oban_jobs (worker, queue, args, state)"
            " SELECT %s, 'timers', jsonb_build_object("
            "     'scope', 'scope-' || (g / 2), 'ordinal', g %% 2 + 1), 'completed'"
            " FROM generate_series(0, 39999) AS g",
            [TIMER_WORKER],
        )
        await conn.execute("ANALYZE oban_jobs")
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        await conn.execute(
            "PREPARE one_scope AS SELECT id FROM oban_jobs WHERE args->>'scope' = $1"
        )
        plan = await plan_text(conn, "EXECUTE one_scope('scope-7')")
    estimate = re.search(r"rows=(\d+)", plan)
    assert estimate is not None, plan
    assert int(estimate.group(1)) <= 10, plan


# --- the fixtures -------------------------------------------------------------------------

_seen_databases: list[str] = []


@pytest.mark.parametrize("run", ["first", "second"])
async def test_each_test_gets_a_fresh_database(database_url: str, run: str) -> None:
    name = str(conninfo_to_dict(database_url)["dbname"])
    assert name not in _seen_databases
    _seen_databases.append(name)
    async with await connect(database_url) as conn:
        assert await fetch_all(conn, "SELECT count(*) FROM oban_jobs") == [(0,)]
        await insert_job(conn, scope="isolation", ordinal=1)  # same row in both runs
        assert await fetch_all(conn, "SELECT count(*) FROM oban_jobs") == [(1,)]


async def test_the_template_refuses_connections(pg_server: Any, template_database: str) -> None:
    with pytest.raises(psycopg.OperationalError, match="not currently accepting connections"):
        await AsyncConnection.connect(pg_server.url_for(template_database))


@worker(queue="probe")
class ProbeWorker:
    """Does nothing; completing it proves a started instance executes jobs."""

    async def process(self, job: Job) -> None:
        return None


async def test_start_oban_runs_real_workers(pool: AsyncConnectionPool, start_oban: Any) -> None:
    node = await start_oban({"probe": 1})
    # oban's @worker adds ``new`` at run time; mypy does not apply class decorators.
    job = await node.enqueue(ProbeWorker.new({"n": 1}))  # type: ignore[attr-defined]
    async with pool.connection() as conn:
        for _ in range(100):
            rows = await fetch_all(
                conn, "SELECT state::text FROM oban_jobs WHERE id = %s", [job.id]
            )
            if rows == [("completed",)]:
                break
            await asyncio.sleep(0.05)
    assert rows == [("completed",)]
    assert node.is_leader


# --- the embedded server ------------------------------------------------------------------


def test_embedded_server_urls(pg_server: Any) -> None:
    if pg_server.embedded is None:
        pytest.skip("DATABASE_URL names the server")
    params = conninfo_to_dict(pg_server.url)
    assert params["dbname"] == "postgres"
    assert params["user"] == "postgres"
    assert Path(str(params["host"]), f".s.PGSQL.{params['port']}").is_socket()
    other = conninfo_to_dict(pg_server.embedded.url_for("other_db"))
    assert other == {**params, "dbname": "other_db"}
    with psycopg.connect(pg_server.url) as conn:
        assert conn.execute("SHOW fsync").fetchone() == ("off",)


def test_embedded_refuses_an_existing_data_dir(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    with pytest.raises(FileExistsError):
        EmbeddedPostgres.start(tmp_path)
    assert (tmp_path / "data").exists()
