"""The SQL loader (``statifier_oban.store._sql``) and the one cancel statement, on PostgreSQL."""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

import pytest
from psycopg import AsyncClientCursor, AsyncConnection
from statifier_oban import InvalidPrefix, StatementError
from statifier_oban._names import (
    CHILD_START_WORKER,
    INVOKE_PENDING_INDEX,
    INVOKE_WORKER,
    SETTLEMENT_WORKER,
    TIMER_PENDING_INDEX,
    TIMER_WORKER,
)
from statifier_oban.store import _sql

PLACEHOLDER = re.compile(r"\{[a-z_]+\}")


FRAGMENTS = {name for chosen in _sql._CHOSEN_FRAGMENTS.values() for name in chosen.values()}
"""The files filled into a statement, not statements of their own."""


def statement_names() -> list[str]:
    """Every statement shipped in ``statifier_oban/store/sql`` (not its fragments)."""
    folder = resources.files("statifier_oban.store").joinpath("sql")
    names = (p.name.removesuffix(".sql") for p in folder.iterdir() if p.name.endswith(".sql"))
    return sorted(set(names) - FRAGMENTS)


def test_the_statements_are_shipped_as_files() -> None:
    assert {"insert_timer", "cancel_jobs", "timer_indexes", "invoke_indexes"} <= set(
        statement_names()
    )


CHOICES: dict[str, dict[str, str]] = {
    "cancel_jobs": {"worker": TIMER_WORKER, "key": "send_id"},
    "insert_fan_out_job": {"worker": SETTLEMENT_WORKER},
    "ack_jobs": {"acked": "ids"},
}
"""The choices of the statements that have some."""


@pytest.mark.parametrize("name", statement_names())
def test_every_statement_renders_with_nothing_left_to_fill(name: str) -> None:
    choices = CHOICES.get(name, {})
    text = _sql.statement(name, "tenant_a", **choices)
    assert PLACEHOLDER.search(text) is None, text
    assert "{prefix}" not in text
    assert "tenant_a." in text or name == "verify_schema"
    # Rendered once, then cached.
    assert _sql.statement(name, "tenant_a", **choices) is text


def test_the_worker_and_key_of_the_cancel_are_literals() -> None:
    text = _sql.statement("cancel_jobs", "public", worker=INVOKE_WORKER, key="invoke_id")
    assert f"worker = '{INVOKE_WORKER}'" in text
    assert "args->>'invoke_id' = %(value)s" in text


@pytest.mark.parametrize(
    "choices",
    [
        {"worker": "someone.else.Worker", "key": "send_id"},
        {"worker": TIMER_WORKER, "key": "scope"},
        {"worker": TIMER_WORKER, "key": "send_id", "queue": "timers"},
    ],
)
def test_a_choice_outside_the_allowed_values_is_refused(choices: dict[str, str]) -> None:
    with pytest.raises(StatementError):
        _sql.statement("cancel_jobs", "public", **choices)


def test_an_ack_finds_its_rows_by_an_array_or_by_the_one_id_without_comments() -> None:
    batch = _sql.statement("ack_jobs", "public", acked="ids")
    alone = _sql.statement("ack_jobs", "public", acked="id")
    assert "WHERE jobs.id = ANY(%(ids)s::bigint[])\n" in batch
    assert "WHERE jobs.id = %(id)s::bigint\n" in alone
    assert "%(ids)s" not in alone
    assert batch.replace("= ANY(%(ids)s::bigint[])", "= %(id)s::bigint") == alone
    with pytest.raises(StatementError):
        _sql.statement("ack_jobs", "public", acked="rows")


def test_a_statement_that_needs_a_choice_is_refused_without_it() -> None:
    with pytest.raises(StatementError, match="worker"):
        _sql.statement("cancel_jobs", "public")


@pytest.mark.parametrize("name", ["no_such_statement", "../schema", "Insert_Timer"])
def test_an_unknown_statement_is_refused(name: str) -> None:
    with pytest.raises(StatementError):
        _sql.statement(name, "public")


def test_an_unusable_prefix_is_refused() -> None:
    with pytest.raises(InvalidPrefix):
        _sql.statement("insert_timer", 'x"; DROP TABLE t; --')


# --- the one cancel statement uses the pending indexes, also as a generic plan -------------


async def load_rows(conn: AsyncConnection[Any], count: int = 6000) -> None:
    """Timer, invocation and child start rows across 500 scopes, in mixed states."""
    await conn.execute(
        """
        INSERT INTO oban_jobs (worker, queue, args, state)
        SELECT (ARRAY[%(timer)s, %(invoke)s, %(child)s])[1 + g %% 3], 'q',
               jsonb_build_object(
                   'scope', 'scope-' || (g %% 500), 'ordinal', g,
                   'send_id', 'send-' || (g %% 7), 'invoke_id', 'inv-' || (g %% 5)),
               (ARRAY['scheduled', 'available', 'retryable', 'executing', 'completed',
                      'cancelled', 'discarded'])[1 + g %% 7]::oban_job_state
        FROM generate_series(1, %(count)s) AS g
        """,
        {
            "timer": TIMER_WORKER,
            "invoke": INVOKE_WORKER,
            "child": CHILD_START_WORKER,
            "count": count,
        },
    )
    await conn.execute("ANALYZE oban_jobs")


async def generic_plan(conn: AsyncConnection[Any], name: str, worker: str, key: str) -> str:
    """EXPLAIN of the library's cancel statement, prepared and forced to a generic plan."""
    text = _sql.statement("cancel_jobs", "public", worker=worker, key=key)
    prepared = text.replace("%(scope)s", "$1").replace("%(value)s", "$2")
    prepared = prepared.replace("%(reason)s", "$3::text")
    await conn.execute("SET plan_cache_mode = force_generic_plan")
    await conn.execute(f"PREPARE {name} AS {prepared}".encode())
    cursor = AsyncClientCursor(conn)
    await cursor.execute(f"EXPLAIN EXECUTE {name}('scope-3', 'x', 'explain')".encode())
    return "\n".join(row[0] for row in await cursor.fetchall())


@pytest.mark.parametrize(
    ("worker", "key", "index"),
    [
        (TIMER_WORKER, "send_id", TIMER_PENDING_INDEX),
        (INVOKE_WORKER, "invoke_id", INVOKE_PENDING_INDEX),
        (CHILD_START_WORKER, "invoke_id", INVOKE_PENDING_INDEX),
    ],
)
async def test_the_cancel_of_every_kind_of_job_is_an_index_scan(
    database_url: str, worker: str, key: str, index: str
) -> None:
    async with await AsyncConnection.connect(database_url, autocommit=True) as conn:
        await load_rows(conn)
        plan = await generic_plan(conn, "library_cancel", worker, key)
    assert index in plan, plan
