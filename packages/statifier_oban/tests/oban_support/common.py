"""Helpers every integration harness shares.

The timer harness (``oban_support.harness``), the invoke harness
(``oban_support.invoke_harness``) and the fan-out rig (``oban_support.fanout_rig``) build on
these: charts and unique names, one database per test module (``module_database``), oban's
name registry (``forget_instance``), the signature of conftest's ``start_oban``
(``StartOban``), telemetry capture, polling, ``oban_jobs`` rows, sessions, and the
module-level fixtures built on them (``database_fixture``, ``sessions_fixture``).
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import oban.oban as oban_module
import psycopg
import pytest
import pytest_asyncio
import statifier
from oban import Oban
from oban import telemetry as oban_telemetry
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from statifier.runtime.session import Session
from statifier_oban import telemetry
from statifier_oban._names import INVOKE_WORKER

NS = 'xmlns="http://www.w3.org/2005/07/scxml"'

DEADLINE_S = 5.0
"""Default deadline for anything a running queue should do within a few stager ticks."""

TERMINAL = ("completed", "cancelled", "discarded")
SETTLED = (*TERMINAL, "retryable")
"""Where a job's attempt ends."""


def chart(body: str, **attrs: str) -> statifier.Machine:
    """Compile an SCXML chart (Python datamodel) from its ``<scxml>`` body."""
    extra = " ".join(f'{key}="{value}"' for key, value in attrs.items())
    return statifier.compile(f"<scxml {NS} {extra}>{body}</scxml>")


def unique(kind: str = "scope") -> str:
    """A name (scope, queue, invoke id, Oban name) no other test uses."""
    return f"{kind}_{uuid.uuid4().hex[:12]}"


# --- databases and Oban instances -----------------------------------------------------------


@contextmanager
def module_database(admin_url: str, template: str) -> Iterator[str]:
    """A database copied from ``template`` on the server of ``admin_url``; dropped at exit."""
    name = f"mod_{uuid.uuid4().hex[:16]}"
    ident = sql.Identifier(name)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(ident, sql.Identifier(template))
        )
    try:
        yield make_conninfo(admin_url, dbname=name)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))


def forget_instance(instance: Oban) -> None:
    """Drop ``instance`` from oban's global name registry (private API, best effort)."""
    registry = getattr(oban_module, "_instances", None)
    name = getattr(instance, "_name", None)
    if isinstance(registry, dict) and registry.get(name) is instance:
        del registry[name]


class StartOban(Protocol):
    """Signature of the ``start_oban`` fixture."""

    def __call__(
        self,
        queues: dict[str, Any],
        *,
        pool: AsyncConnectionPool | None = None,
        **options: Any,
    ) -> Awaitable[Oban]:
        """Start a server-mode ``Oban`` running ``queues``; see the fixture."""
        ...


# --- telemetry ------------------------------------------------------------------------------


@dataclass
class Captured:
    """statifier_oban telemetry events seen while a ``capture_telemetry`` block ran."""

    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def named(
        self, name: str, scope: str | None = None, invoke_id: str | None = None
    ) -> list[dict[str, Any]]:
        """Metas of the events called ``name`` (filtered on scope/invoke_id when given)."""
        return [
            meta
            for event, meta in self.events
            if event == name
            and (scope is None or meta.get("scope") == scope)
            and (invoke_id is None or meta.get("invoke_id") == invoke_id)
        ]

    def for_scope(self, scope: str) -> list[str]:
        """Names of every event about ``scope``, in order."""
        return [event for event, meta in self.events if meta.get("scope") == scope]


@contextmanager
def capture_telemetry() -> Iterator[Captured]:
    """Record every statifier_oban event (oban's global handler table) until the block ends."""
    captured = Captured()
    handler_id = f"test-{uuid.uuid4().hex}"

    def handler(name: str, meta: dict[str, Any]) -> None:
        captured.events.append((name, dict(meta)))

    oban_telemetry.attach(handler_id, telemetry.events(), handler)
    try:
        yield captured
    finally:
        oban_telemetry.detach(handler_id)


# --- waiting --------------------------------------------------------------------------------


async def wait_until(
    predicate: Callable[[], Any | Awaitable[Any]],
    *,
    timeout: float = DEADLINE_S,
    interval: float = 0.02,
    what: str = "condition",
) -> Any:
    """Poll ``predicate`` (sync or async) until it returns a truthy value; return that value."""

    async def poll() -> Any:
        while True:
            value = predicate()
            if inspect.isawaitable(value):
                value = await value
            if value:
                return value
            await asyncio.sleep(interval)

    try:
        return await asyncio.wait_for(poll(), timeout)
    except TimeoutError:
        raise AssertionError(f"{what} not reached within {timeout} s") from None


async def watched(pool: AsyncConnectionPool, execution_id: str, *, timeout: float = 20) -> None:
    """Return once a waiter (``Executions.wait``, ``follow``, the ``wait`` and ``history
    --follow`` commands) watches ``execution_id``: it is then ready to be woken."""

    async def watching() -> bool:
        async with pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT count(*) FROM statifier_watches WHERE execution_id = %s", [execution_id]
            )
            row = await cursor.fetchone()
        return bool(row and row[0])

    await wait_until(watching, timeout=timeout, what=f"a watch of {execution_id}")


# --- job rows -------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobRow:
    """One ``oban_jobs`` row, with the database clock read in the same statement."""

    id: int
    state: str
    queue: str
    worker: str
    attempt: int
    max_attempts: int
    args: Any
    meta: dict[str, Any]
    errors: list[dict[str, Any]]
    inserted_at: datetime
    scheduled_at: datetime
    attempted_at: datetime | None
    completed_at: datetime | None
    cancelled_at: datetime | None
    now: datetime

    @property
    def error_text(self) -> str:
        """Every recorded error, joined."""
        return "\n".join(str(error.get("error")) for error in self.errors)

    @property
    def attempts_left(self) -> int:
        """``max_attempts - attempt``: what a snooze must not spend."""
        return self.max_attempts - self.attempt

    @property
    def index(self) -> Any:
        """A child start's ``args["index"]`` (None on other rows)."""
        return self.args.get("index") if isinstance(self.args, dict) else None

    def seconds_until_scheduled(self) -> float:
        """How far ``scheduled_at`` lies in the future, by the database clock."""
        return (self.scheduled_at - self.now).total_seconds()


COLUMNS = """
    id, state::text, queue, worker, attempt, max_attempts, args, meta, errors,
    inserted_at, scheduled_at, attempted_at, completed_at, cancelled_at,
    timezone('UTC', clock_timestamp())
"""
"""The columns of ``JobRow``, in order. ``now`` is the clock as the row is read, not the
reading transaction's start (``now()``): a write that committed between that start and
the read's snapshot would otherwise lie in the reader's future (a snooze read back 0.3 ms
more than its length)."""


async def job_rows(pool: AsyncConnectionPool, where: str, params: Any = None) -> list[JobRow]:
    """The rows of ``SELECT <JobRow columns> FROM oban_jobs WHERE <where>`` (may order too)."""
    async with pool.connection() as conn:
        query = f"SELECT {COLUMNS} FROM oban_jobs WHERE {where}"  # noqa: S608 - see below
        # ``where`` is a test's own literal clause; values are bound parameters.
        cursor = await conn.execute(query, params)
        rows = await cursor.fetchall()
    return [JobRow(*row) for row in rows]


async def job_row(pool: AsyncConnectionPool, job_id: int) -> JobRow:
    """The row of job ``job_id`` (it must exist)."""
    rows = await job_rows(pool, "id = %s", [job_id])
    assert rows, f"job {job_id} does not exist"
    return rows[0]


async def wait_for_state(
    pool: AsyncConnectionPool, job_id: int, *states: str, timeout: float = DEADLINE_S
) -> JobRow:
    """Poll job ``job_id`` until its state is one of ``states``; return the row."""
    seen: list[str] = []

    async def reached() -> JobRow | None:
        row = await job_row(pool, job_id)
        if not seen or seen[-1] != row.state:
            seen.append(row.state)
        return row if row.state in states else None

    try:
        found: JobRow = await wait_until(reached, timeout=timeout)
    except AssertionError:
        raise AssertionError(
            f"job {job_id} did not reach {states} within {timeout} s (states seen: {seen})"
        ) from None
    return found


async def execute(pool: AsyncConnectionPool, statement: Any, params: Any = None) -> None:
    """Run one statement on a pooled connection (committed on return)."""
    async with pool.connection() as conn:
        await conn.execute(statement, params)


async def insert_row(
    pool: AsyncConnectionPool,
    args: Any,
    *,
    queue: str,
    worker: str = INVOKE_WORKER,
    meta: dict[str, Any] | None = None,
    attempt: int = 0,
    max_attempts: int = 20,
    state: str = "available",
) -> int:
    """Insert a raw row with exactly these args and meta (bypassing every insert of ours).

    For corrupt rows; a job made ``available`` on a running queue is picked up within a
    stager tick. Returns its id.
    """
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "INSERT INTO oban_jobs (args, meta, queue, worker, state, attempt, max_attempts)"
            " VALUES (%s, %s, %s, %s, %s::oban_job_state, %s, %s) RETURNING id",
            [Jsonb(args), Jsonb(meta or {}), queue, worker, state, attempt, max_attempts],
        )
        row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


# --- sessions -------------------------------------------------------------------------------


class Sessions:
    """Starts sessions for a test and stops every one of them at teardown."""

    def __init__(self) -> None:
        self.started: list[Session] = []

    async def start(self, machine: statifier.Machine, **options: Any) -> Session:
        """``Session.start(machine, **options)``, remembered for teardown."""
        session = await Session.start(machine, **options)
        self.started.append(session)
        return session

    async def stop_all(self) -> None:
        """Stop every session started here (stopping twice is a no-op)."""
        for session in reversed(self.started):
            await session.stop()


async def wait_for_configuration(session: Session, state_id: str, **kwargs: Any) -> None:
    """Poll until ``state_id`` is in the session's configuration."""
    await wait_until(
        lambda: state_id in session.status().configuration,
        what=f"{session.session_id} in {state_id!r}",
        **kwargs,
    )


# --- module-level fixtures ------------------------------------------------------------------


def database_fixture(name: str = "database") -> Any:
    """A module-scoped fixture ``name``: one database for the module (``module_database``).

    Use as ``database = database_fixture()`` in a test module; the tests of the module share
    it and isolate on scope and queue names.
    """

    @pytest.fixture(scope="module", name=name)
    def database(pg_server: Any, template_database: str) -> Iterator[str]:
        """One database for this module's tests (they isolate on scope and queue)."""
        with module_database(pg_server.url, template_database) as url:
            yield url

    return database


def sessions_fixture() -> Any:
    """A fixture ``sessions``: a ``Sessions`` whose sessions are stopped at teardown.

    Use as ``sessions = sessions_fixture()`` in a test module.
    """

    @pytest_asyncio.fixture(name="sessions")
    async def sessions() -> AsyncIterator[Sessions]:
        """Sessions started by the test, stopped at teardown."""
        started = Sessions()
        yield started
        await started.stop_all()

    return sessions
