"""The fan-out tests' rig: one database per module, a real Oban per test, rows and telemetry.

Creating a database costs 0.5-1 s, so ``test_fan_out`` shares one per module (copied from
conftest's ``template_database``) while every test gets its own pool, its own server-mode
Oban running a queue of its own (``Rig.start``), and scopes of its own. Rows of other tests
sit in the same table on queues nobody runs; every query here filters on scope.

Import path: the tests run with ``--import-mode=importlib`` and ``conftest.py`` does not
touch ``sys.path``, so a test module appends this directory to ``sys.path`` before importing
``support_fanout_*``. That also lets the workers resolve ``support_fanout_seams:Name`` paths
named on job rows, because they run in the test process.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import oban.oban as oban_module
import psycopg
import support_fanout_seams as seams
from oban import Oban
from oban import telemetry as oban_telemetry
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from statifier.effects import Invoke
from statifier_oban import invoke_args, telemetry
from statifier_oban.config import Config
from statifier_oban.names import CHILD_START_WORKER, INVOKE_WORKER

DEADLINE_S = 5.0
"""How long anything a running queue should do within a few stager ticks may take."""


def unique(kind: str) -> str:
    """A name no other test uses (scopes, queues, Oban names)."""
    return f"{kind}_{uuid.uuid4().hex[:12]}"


def make_invoke(**overrides: Any) -> Invoke:
    """A ``core.map``-shaped ``Invoke`` effect; any field can be overridden."""
    values: dict[str, Any] = {
        "invoke_id": "map",
        "type": "test:map",
        "src": None,
        "params": {"items": [{"chunk": 0}, {"chunk": 1}, {"chunk": 2}]},
        "content": None,
        "autoforward": False,
        "state_index": 2,
        "invoke_index": 0,
        "caller_context": {"trace": "t-1", "tenant": 7},
        "macrostep": 3,
        "microstep": 1,
        "round": 0,
    }
    values.update(overrides)
    return Invoke(**values)


def parent_args(scope: str, invoke: Invoke) -> dict[str, Any]:
    """The args of ``invoke``'s invocation job, exactly as ``enqueue`` stores them."""
    return invoke_args.encode(scope, seams.HANDLER_PATH, invoke, None)


# --- databases ------------------------------------------------------------------------------


@contextmanager
def module_database(admin_url: str, template: str) -> Iterator[str]:
    """A database copied from ``template``; dropped (``WITH (FORCE)``) at exit."""
    name = unique("fanout")
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


def _forget(instance: Oban) -> None:
    """Drop ``instance`` from oban's global name registry (private API, best effort)."""
    registry = getattr(oban_module, "_instances", None)
    name = getattr(instance, "_name", None)
    if isinstance(registry, dict) and registry.get(name) is instance:
        del registry[name]


class Rig:
    """One test's pool, client Oban, server Oban (on demand) and queues.

    * ``queue``: the queue ``start()`` runs (invocations and child starts land there);
    * ``parked``: a queue nobody runs, for rows that must stay pending.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.queue = unique("invokes")
        self.parked = unique("parked")
        self.pool = AsyncConnectionPool(url, open=False, min_size=1, max_size=8)
        self.client: Oban | None = None
        self.server: Oban | None = None
        self.scopes: list[str] = []

    async def open(self) -> None:
        """Open the pool and build the client-mode Oban (never started)."""
        await self.pool.open(wait=True)
        self.client = Oban(pool=self.pool, name=unique("client"))

    async def start(self, limit: int = 10) -> Oban:
        """Start a server-mode Oban running ``queue`` with ``limit`` slots (stager 0.1 s)."""
        assert self.server is None, "one server per test"
        name = unique("server")
        self.server = Oban(
            pool=self.pool,
            name=name,
            node=f"{name}.node",
            queues={self.queue: limit},
            stager={"interval": 0.1},
            lifeline={"interval": 0.5},
            shutdown_grace_period=1.0,
        )
        await self.server.start()
        return self.server

    async def close(self) -> None:
        """Stop the server, forget both instances, close the pool, forget the scopes."""
        try:
            if self.server is not None:
                try:
                    await self.server.stop()
                finally:
                    _forget(self.server)
            if self.client is not None:
                _forget(self.client)
        finally:
            await self.pool.close()
            seams.forget(*self.scopes)
            seams.use_config(None)

    def scope(self, kind: str = "parent") -> str:
        """A fresh scope, forgotten by the seams at teardown."""
        scope = unique(kind)
        self.scopes.append(scope)
        return scope

    def config(self, *, parked: bool = False, **overrides: Any) -> Config:
        """A config on the running server (else the client) with the recording seams.

        ``parked=True`` names the parked queue as the invoke queue, so whatever lands
        there stays pending. The handler's ``config()`` is *not* changed: see ``use``.
        """
        oban = self.server if self.server is not None else self.client
        assert oban is not None
        options: dict[str, Any] = {
            "oban": oban,
            "timers_queue": unique("timers"),
            "invoke_queue": self.parked if parked else self.queue,
            "invoke_delivery": seams.DELIVERY_PATH,
            "child_starter": seams.STARTER_PATH,
        }
        options.update(overrides)
        return Config(**options)

    def use(self, config: Config) -> Config:
        """Make ``config`` what ``FanOutFromParams.config()`` answers; return it."""
        seams.use_config(config)
        return config

    # --- rows -------------------------------------------------------------------------------

    async def rows(self, scope: str, worker: str = CHILD_START_WORKER) -> list[JobRow]:
        """Every row of ``worker`` for ``scope``, by index (child starts) then id."""
        async with self.pool.connection() as conn:
            cursor = await conn.execute(
                f"SELECT {_COLUMNS} FROM oban_jobs WHERE worker = %s AND args->>'scope' = %s "
                "ORDER BY (args->>'index')::int NULLS FIRST, id",
                [worker, scope],
            )
            found = await cursor.fetchall()
        return [JobRow(*row) for row in found]

    async def row(self, job_id: int) -> JobRow:
        """The row of job ``job_id`` (it must exist)."""
        async with self.pool.connection() as conn:
            cursor = await conn.execute(f"SELECT {_COLUMNS} FROM oban_jobs WHERE id = %s", [job_id])
            found = await cursor.fetchone()
        assert found is not None, f"job {job_id} does not exist"
        return JobRow(*found)

    async def wait_state(self, job_id: int, *states: str, timeout: float = DEADLINE_S) -> JobRow:
        """Poll job ``job_id`` until its state is one of ``states``; return the row."""
        seen: list[str] = []

        async def reached() -> JobRow | None:
            row = await self.row(job_id)
            if not seen or seen[-1] != row.state:
                seen.append(row.state)
            return row if row.state in states else None

        try:
            found: JobRow = await wait_until(reached, timeout=timeout)
        except AssertionError:
            raise AssertionError(
                f"job {job_id} did not reach {states} within {timeout} s (seen: {seen})"
            ) from None
        return found

    async def wait_rows(
        self, scope: str, state: str, count: int, timeout: float = DEADLINE_S
    ) -> list[JobRow]:
        """Poll the child start rows of ``scope`` until ``count`` of them are in ``state``."""

        async def reached() -> list[JobRow] | None:
            found = await self.rows(scope)
            return found if sum(row.state == state for row in found) == count else None

        result: list[JobRow] = await wait_until(
            reached, timeout=timeout, what=f"{count} start rows of {scope} {state}"
        )
        return result

    async def insert_row(
        self,
        *,
        args: dict[str, Any],
        meta: dict[str, Any],
        worker: str = CHILD_START_WORKER,
        queue: str | None = None,
        state: str = "available",
    ) -> int:
        """Insert a row with exactly these args and meta (bypassing our inserts); its id.

        A job made ``available`` on the running queue is picked up within a stager tick.
        """
        async with self.pool.connection() as conn:
            cursor = await conn.execute(
                "INSERT INTO oban_jobs (worker, queue, args, meta, state) "
                "VALUES (%s, %s, %s, %s, %s::oban_job_state) RETURNING id",
                [worker, queue or self.queue, Jsonb(args), Jsonb(meta), state],
            )
            found = await cursor.fetchone()
        assert found is not None
        return int(found[0])

    async def execute(self, statement: Any, params: Any = None) -> None:
        """Run one statement on a pooled connection (committed on return)."""
        async with self.pool.connection() as conn:
            await conn.execute(statement, params)


_COLUMNS = "id, state::text, queue, worker, attempt, max_attempts, args, meta, errors"


@dataclass(frozen=True)
class JobRow:
    """The columns of one ``oban_jobs`` row the fan-out tests look at."""

    id: int
    state: str
    queue: str
    worker: str
    attempt: int
    max_attempts: int
    args: dict[str, Any]
    meta: dict[str, Any]
    errors: list[dict[str, Any]]

    @property
    def error_text(self) -> str:
        """Every recorded error, joined."""
        return "\n".join(str(error.get("error")) for error in self.errors)

    @property
    def index(self) -> Any:
        """The child start's ``args["index"]`` (None on other rows)."""
        return self.args.get("index")


INVOKE_ROWS = INVOKE_WORKER
"""Pass as ``worker`` to ``Rig.rows`` for the invocation rows of a scope."""


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

    def names(self, scope: str) -> list[str]:
        """Names of every event about ``scope``, in order."""
        return [event for event, meta in self.events if meta.get("scope") == scope]


@contextmanager
def capture_telemetry() -> Iterator[Captured]:
    """Record every statifier_oban event until the block ends."""
    captured = Captured()
    handler_id = unique("fanout-test")

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
