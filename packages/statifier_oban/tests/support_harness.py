"""Helpers shared by the timer integration tests (a support module: pytest does not collect it).

Harness: creating a database from the schema template costs 0.5-1 s, so each test module
shares one database (``module_database``, copied from conftest's ``template_database`` and
dropped after the module) while every test gets its own pool, its own server-mode Oban and its
own queue name (``running_servers``). Rows of other tests sit in the same table on queues
nobody runs; tests isolate on scope and queue, as the reference suite does.

Import path: the tests run with ``--import-mode=importlib`` and ``conftest.py`` does not touch
``sys.path``, so this directory is not importable by default. Every test module that needs a
support module first appends this directory to ``sys.path`` (see ``TESTS_DIR`` there). That
also lets oban's worker resolve deliveries named on job rows as ``support_deliveries:Name``,
because the worker runs in the test process and resolves paths with ``importlib``. The
SIGKILL test's worker processes run ``support_sigkill.py`` by path, which puts this directory
first on their ``sys.path``.

The harness does not use conftest's ``pool``/``start_oban``: those hang off ``database_url``,
which creates a database per test.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import oban.oban as oban_module
import psycopg
import statifier
from oban import Oban
from oban import telemetry as oban_telemetry
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from statifier.effects import Cancel, SendDelayed
from statifier.session import Session
from statifier_oban import Config, telemetry
from statifier_oban.names import TIMER_WORKER

NS = 'xmlns="http://www.w3.org/2005/07/scxml"'

DEADLINE_S = 5.0
"""Default deadline for anything a running queue should do within a few stager ticks."""


def chart(body: str, **attrs: str) -> statifier.Machine:
    """Compile an SCXML chart (Python datamodel) from its ``<scxml>`` body."""
    extra = " ".join(f'{key}="{value}"' for key, value in attrs.items())
    return statifier.compile(f"<scxml {NS} {extra}>{body}</scxml>")


def unique_scope(kind: str = "scope") -> str:
    """A scope (session id) no other test uses."""
    return f"{kind}_{uuid.uuid4().hex[:12]}"


def send_delayed(**overrides: Any) -> SendDelayed:
    """A schedulable ``SendDelayed`` (to the session itself) with plausible defaults."""
    fields: dict[str, Any] = {
        "event": "authorization.expired",
        "target": None,
        "type": None,
        "data": None,
        "send_id": "hold",
        "delay_ms": 100,
        "c_index": 0,
        "owner": ("onentry", 1, 0),
        "ordinal": 1,
        "id_from_author": True,
        "caller_context": None,
        "macrostep": 0,
        "microstep": 0,
        "round": 0,
    }
    fields.update(overrides)
    return SendDelayed(**fields)


def cancel_effect(send_id: str = "hold", **overrides: Any) -> Cancel:
    """A ``<cancel sendid=...>`` effect."""
    fields: dict[str, Any] = {
        "send_id": send_id,
        "c_index": 1,
        "owner": ("onexit", 1, 0),
        "ordinal": 1,
        "caller_context": None,
        "macrostep": 1,
        "microstep": 1,
        "round": 0,
    }
    fields.update(overrides)
    return Cancel(**fields)


# --- databases and servers -----------------------------------------------------------------


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


@dataclass
class Server:
    """A started server-mode Oban running one queue of its own, on a pool of its own."""

    oban: Oban
    pool: AsyncConnectionPool
    queue: str
    stopped: bool = False

    def config(self, **options: Any) -> Config:
        """A ``Config`` naming this instance and its queue."""
        return Config(oban=self.oban, timers_queue=self.queue, **options)

    async def stop(self) -> None:
        """Stop the instance (idempotent) and drop it from oban's name registry."""
        if self.stopped:
            return
        self.stopped = True
        try:
            await self.oban.stop()
        finally:
            if oban_module._instances.get(self.oban._name) is self.oban:
                del oban_module._instances[self.oban._name]


class Servers:
    """Factory of ``Server``s on one database; see ``running_servers``."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.pools: list[AsyncConnectionPool] = []
        self.servers: list[Server] = []

    async def pool(self, max_size: int = 5) -> AsyncConnectionPool:
        """A new open pool on the database (closed at exit)."""
        pool = AsyncConnectionPool(self.url, open=False, min_size=1, max_size=max_size)
        await pool.open()
        self.pools.append(pool)
        return pool

    async def build(
        self, queue: str | None = None, *, pool: AsyncConnectionPool | None = None, **options: Any
    ) -> Server:
        """An Oban (unique name and node, stager every 0.1 s) for ``queue``, not started yet.

        Call ``await server.oban.start()`` to run it; a never-started one serves as a client.
        """
        name = f"srv_{uuid.uuid4().hex[:12]}"
        queue = queue or f"timers_{uuid.uuid4().hex[:8]}"
        settings: dict[str, Any] = {
            "name": name,
            "node": f"{name}.node",
            "stager": {"interval": 0.1},
            "lifeline": {"interval": 0.5},
            "shutdown_grace_period": 1.0,
        }
        settings.update(options)
        chosen = pool or await self.pool()
        server = Server(Oban(pool=chosen, queues={queue: 5}, **settings), chosen, queue)
        self.servers.append(server)
        return server

    async def start(
        self, queue: str | None = None, *, pool: AsyncConnectionPool | None = None, **options: Any
    ) -> Server:
        """``build`` then start: a server-mode Oban running ``queue`` (a fresh one by default)."""
        server = await self.build(queue, pool=pool, **options)
        await server.oban.start()
        return server

    async def close(self) -> None:
        """Stop every server (newest first), then close every pool."""
        errors: list[BaseException] = []
        for server in reversed(self.servers):
            try:
                await server.stop()
            except Exception as exc:  # stop the others anyway
                errors.append(exc)
        for pool in self.pools:
            await pool.close()
        if errors:
            raise errors[0]


@asynccontextmanager
async def running_servers(url: str) -> AsyncIterator[Servers]:
    """A ``Servers`` factory on ``url``; everything it started is stopped at exit."""
    servers = Servers(url)
    try:
        yield servers
    finally:
        await servers.close()


# --- telemetry ------------------------------------------------------------------------------


@dataclass
class Captured:
    """statifier_oban telemetry events seen while a ``capture_telemetry`` block ran."""

    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def named(self, name: str, scope: str | None = None) -> list[dict[str, Any]]:
        """Metas of the events called ``name`` (only those of ``scope`` when given)."""
        return [
            meta
            for event, meta in self.events
            if event == name and (scope is None or meta.get("scope") == scope)
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

    def seconds_until_scheduled(self) -> float:
        """How far ``scheduled_at`` lies in the future, by the database clock."""
        return (self.scheduled_at - self.now).total_seconds()


_COLUMNS = """
    id, state::text, queue, worker, attempt, max_attempts, args, meta, errors,
    inserted_at, scheduled_at, attempted_at, completed_at, cancelled_at, timezone('UTC', now())
"""


async def job_row(pool: AsyncConnectionPool, job_id: int) -> JobRow:
    """The row of job ``job_id`` (it must exist)."""
    async with pool.connection() as conn:
        cursor = await conn.execute(f"SELECT {_COLUMNS} FROM oban_jobs WHERE id = %s", [job_id])
        row = await cursor.fetchone()
    assert row is not None, f"job {job_id} does not exist"
    return JobRow(*row)


async def timer_rows(pool: AsyncConnectionPool, scope: str) -> list[JobRow]:
    """Every timer job row of ``scope``, by ordinal."""
    async with pool.connection() as conn:
        cursor = await conn.execute(
            f"SELECT {_COLUMNS} FROM oban_jobs WHERE worker = %s AND args->>'scope' = %s "
            "ORDER BY (args->>'ordinal')::int, id",
            [TIMER_WORKER, scope],
        )
        rows = await cursor.fetchall()
    return [JobRow(*row) for row in rows]


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
        result: JobRow = await wait_until(reached, timeout=timeout, interval=0.02)
    except AssertionError:
        raise AssertionError(
            f"job {job_id} did not reach {states} within {timeout} s (states seen: {seen})"
        ) from None
    return result


async def set_due_now(pool: AsyncConnectionPool, job_id: int) -> None:
    """Move a scheduled job's ``scheduled_at`` to now, so the stager picks it up."""
    await execute(
        pool, "UPDATE oban_jobs SET scheduled_at = timezone('UTC', now()) WHERE id = %s", [job_id]
    )


async def set_meta_delivery(pool: AsyncConnectionPool, job_id: int, value: Any) -> None:
    """Overwrite (or, with the sentinel ``REMOVE``, delete) ``meta.delivery`` of a job."""
    if value is REMOVE:
        await execute(pool, "UPDATE oban_jobs SET meta = meta - 'delivery' WHERE id = %s", [job_id])
    else:
        await execute(
            pool,
            "UPDATE oban_jobs SET meta = jsonb_set(meta, '{delivery}', %s) WHERE id = %s",
            [Jsonb(value), job_id],
        )


REMOVE: Any = object()


async def execute(pool: AsyncConnectionPool, statement: Any, params: Any = None) -> None:
    """Run one statement on a pooled connection (committed on return)."""
    async with pool.connection() as conn:
        await conn.execute(statement, params)


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
