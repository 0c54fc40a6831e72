"""The timer integration tests' harness.

Harness: creating a database from the schema template costs 0.5-1 s, so each test module
shares one database (``oban_support.common.module_database``, copied from conftest's
``template_database`` and dropped after the module) while every test gets its own pool, its
own server-mode Oban and its own queue name (``running_servers``). Rows of other tests sit in
the same table on queues nobody runs; tests isolate on scope and queue, as the reference suite
does. What the timer, invoke and fan-out tests share (charts, names, rows, telemetry, polling,
sessions) lives in ``oban_support.common``; this module adds timer effects, servers and
timer rows.

Oban's worker runs in the test process and resolves the deliveries named on job rows
(``oban_support.deliveries:Name``) with ``importlib``, through the same import path as the
tests (pytest's ``pythonpath``).

The harness does not use conftest's ``pool``/``start_oban``: those hang off ``database_url``,
which creates a database per test.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest_asyncio
from oban import Oban
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from statifier.core.effects import Cancel, SendDelayed
from statifier_oban import Config
from statifier_oban._names import TIMER_WORKER

from oban_support.common import JobRow, execute, forget_instance, job_rows, unique
from oban_support.deliveries import forget


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
            forget_instance(self.oban)


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


# --- job rows -------------------------------------------------------------------------------


async def timer_rows(pool: AsyncConnectionPool, scope: str) -> list[JobRow]:
    """Every timer job row of ``scope``, by ordinal."""
    return await job_rows(
        pool,
        "worker = %s AND args->>'scope' = %s ORDER BY (args->>'ordinal')::int, id",
        [TIMER_WORKER, scope],
    )


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


# --- fixtures -------------------------------------------------------------------------------


def server_fixture() -> Any:
    """A fixture ``server`` on the module's ``database``: a server-mode Oban with a queue of
    its own, on a pool of its own. Use as ``server = server_fixture()`` in a test module."""

    @pytest_asyncio.fixture(name="server")
    async def server(database: str) -> AsyncIterator[Server]:
        """A server-mode Oban with a queue of its own, on a pool of its own."""
        async with running_servers(database) as servers:
            yield await servers.start()

    return server


def servers_fixture() -> Any:
    """A fixture ``servers`` on the module's ``database``: a ``Servers`` factory whose pools
    and instances are closed at teardown. Use as ``servers = servers_fixture()``."""

    @pytest_asyncio.fixture(name="servers")
    async def servers(database: str) -> AsyncIterator[Servers]:
        """Factory of Oban instances on the module's database, all stopped at teardown."""
        async with running_servers(database) as factory:
            yield factory

    return servers


def scope_fixture(kind: str) -> Any:
    """A fixture ``scope``: a fresh scope named after ``kind`` whose recorded calls and scripts
    (``oban_support.deliveries``) are dropped afterwards.

    Use as ``scope = scope_fixture("kind")``.
    """

    @pytest_asyncio.fixture(name="scope")
    async def scope() -> AsyncIterator[str]:
        """A fresh scope whose recorded calls and scripts are dropped afterwards."""
        name = unique(kind)
        yield name
        forget(name)

    return scope
