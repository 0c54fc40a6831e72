"""Harness of the invoke integration tests (a support module: pytest does not collect it).

* One database per test module (``module_database``, copied from conftest's
  ``template_database``): copying costs 0.5-1 s, so the tests of a module share it and
  isolate on scope and queue names, as the reference suite does.
* ``InvokeEnv`` (one per test): an open pool, a client-mode ``Oban`` for enqueueing onto
  queues nobody runs, and ``server(queue)`` for real server-mode instances that run a
  queue with the real ``InvokeWorker``. Everything it starts is stopped at the end.
* Job-row SQL helpers, a telemetry recorder and a poller.

Import path: pytest runs with ``--import-mode=importlib`` and ``conftest.py`` leaves
``sys.path`` alone, so every test module appends this directory to ``sys.path`` before
importing a ``support_invoke_*`` module. That is also what lets the worker (running in the
test process) resolve ``support_invoke_handlers:CaptureHandler`` and friends from job rows.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
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
from statifier.effects import Invoke
from statifier.session import Session
from statifier_oban import Config, telemetry
from statifier_oban.names import INVOKE_WORKER
from support_invoke_handlers import use_config

NS = 'xmlns="http://www.w3.org/2005/07/scxml"'

DEADLINE_S = 5.0
"""Default deadline for anything a running queue should do within a few stager ticks."""

ARGS_KEYS = frozenset(
    {
        "scope",
        "invoke_id",
        "handler",
        "type",
        "src",
        "params",
        "content",
        "caller_context",
        "autoforward",
        "state_index",
        "invoke_index",
        "macrostep",
        "microstep",
        "round",
    }
)
"""The documented key set of an invocation job's args (spec 3.2, ``invoke_args``)."""

TERMINAL = ("completed", "cancelled", "discarded")
SETTLED = (*TERMINAL, "retryable")


def chart(body: str, **attrs: str) -> statifier.Machine:
    """Compile an SCXML chart (Python datamodel) from its ``<scxml>`` body."""
    extra = " ".join(f'{key}="{value}"' for key, value in attrs.items())
    return statifier.compile(f"<scxml {NS} {extra}>{body}</scxml>")


def unique(kind: str) -> str:
    """A name (scope, queue, invoke id) no other test uses."""
    return f"{kind}_{uuid.uuid4().hex[:12]}"


def invoke_effect(**overrides: Any) -> Invoke:
    """An ``Invoke`` effect with plausible defaults; any field can be overridden."""
    fields: dict[str, Any] = {
        "invoke_id": "capture",
        "type": "myapp:capture",
        "src": None,
        "params": {"amount": 125},
        "content": None,
        "autoforward": False,
        "state_index": 2,
        "invoke_index": 0,
        "caller_context": None,
        "macrostep": 1,
        "microstep": 1,
        "round": 0,
    }
    fields.update(overrides)
    return Invoke(**fields)


# --- databases, pools and Oban instances ----------------------------------------------------


@contextmanager
def module_database(admin_url: str, template: str) -> Iterator[str]:
    """A database copied from ``template`` on the server of ``admin_url``; dropped at exit."""
    name = f"inv_{uuid.uuid4().hex[:16]}"
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
    if oban_module._instances.get(instance._name) is instance:
        del oban_module._instances[instance._name]


class InvokeEnv:
    """What one test runs on: see the module docstring."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self.pool = pool
        self.client = Oban(pool=pool, name=unique("client"))
        self.servers: list[Oban] = []
        self._configs = ExitStack()

    async def server(self, *queues: str, limit: int = 5) -> Oban:
        """Start a server-mode Oban running ``queues`` (stager every 0.1 s)."""
        name = unique("srv")
        instance = Oban(
            pool=self.pool,
            name=name,
            node=f"{name}.node",
            queues=dict.fromkeys(queues, limit),
            stager={"interval": 0.1},
            lifeline={"interval": 0.5},
            shutdown_grace_period=1.0,
        )
        self.servers.append(instance)
        await instance.start()
        return instance

    def config(self, oban: Oban | None = None, queue: str | None = None, **options: Any) -> Config:
        """A ``Config`` on ``oban`` (default: the client) whose invoke queue is ``queue``.

        It is also installed as what every support handler's ``config()`` returns.
        """
        config = Config(
            oban=oban or self.client,
            timers_queue=unique("timers"),
            invoke_queue=queue,
            **options,
        )
        self._configs.enter_context(use_config(config))
        return config

    async def close(self) -> None:
        """Stop every server (newest first); uninstall the configs."""
        self._configs.close()
        errors: list[BaseException] = []
        for instance in reversed(self.servers):
            try:
                await instance.stop()
            except Exception as exc:  # stop the others anyway
                errors.append(exc)
            finally:
                _forget(instance)
        _forget(self.client)
        if errors:
            raise errors[0]


@asynccontextmanager
async def invoke_env(url: str) -> AsyncIterator[InvokeEnv]:
    """An ``InvokeEnv`` on a fresh pool on ``url``; everything is stopped and closed at exit."""
    pool = AsyncConnectionPool(url, open=False, min_size=1, max_size=6)
    await pool.open(wait=True)
    env = InvokeEnv(pool)
    try:
        yield env
    finally:
        try:
            await env.close()
        finally:
            await pool.close()


# --- telemetry ------------------------------------------------------------------------------


@dataclass
class Captured:
    """statifier_oban telemetry events seen while a ``capture_telemetry`` block ran."""

    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def named(self, name: str, scope: Any = ..., invoke_id: Any = ...) -> list[dict[str, Any]]:
        """Metas of the events called ``name`` (filtered on scope/invoke_id when given)."""
        return [
            meta
            for event, meta in self.events
            if event == name
            and (scope is ... or meta.get("scope") == scope)
            and (invoke_id is ... or meta.get("invoke_id") == invoke_id)
        ]

    def names_for(self, scope: str) -> list[str]:
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
    """One ``oban_jobs`` row."""

    id: int
    state: str
    queue: str
    worker: str
    attempt: int
    max_attempts: int
    args: Any
    meta: dict[str, Any]
    errors: list[dict[str, Any]]

    @property
    def error_text(self) -> str:
        """Every recorded error, joined."""
        return "\n".join(str(error.get("error")) for error in self.errors)


_COLUMNS = "id, state::text, queue, worker, attempt, max_attempts, args, meta, errors"


async def job_row(pool: AsyncConnectionPool, job_id: int) -> JobRow:
    """The row of job ``job_id`` (it must exist)."""
    async with pool.connection() as conn:
        cursor = await conn.execute(f"SELECT {_COLUMNS} FROM oban_jobs WHERE id = %s", [job_id])
        row = await cursor.fetchone()
    assert row is not None, f"job {job_id} does not exist"
    return JobRow(*row)


async def invoke_rows(pool: AsyncConnectionPool, scope: str) -> list[JobRow]:
    """Every row of ``scope`` whatever its worker (invocation rows have ``args.scope``)."""
    async with pool.connection() as conn:
        cursor = await conn.execute(
            f"SELECT {_COLUMNS} FROM oban_jobs WHERE args->>'scope' = %s ORDER BY id", [scope]
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


async def run_now(pool: AsyncConnectionPool, job_id: int, queue: str | None = None) -> None:
    """Make a retryable (or scheduled) job due now, optionally moving it to ``queue``.

    The stager stages it within a tick (0.1 s): multi-attempt flows without oban's backoff.
    """
    await execute(
        pool,
        "UPDATE oban_jobs SET scheduled_at = timezone('UTC', now()), queue = coalesce(%s, queue)"
        " WHERE id = %s AND state IN ('retryable', 'scheduled')",
        [queue, job_id],
    )


async def insert_row(
    pool: AsyncConnectionPool,
    args: Any,
    *,
    queue: str,
    meta: dict[str, Any] | None = None,
    attempt: int = 0,
    max_attempts: int = 20,
    state: str = "available",
) -> int:
    """Insert a raw invocation row (bypassing ``enqueue``: for corrupt rows); its id."""
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "INSERT INTO oban_jobs (args, meta, queue, worker, state, attempt, max_attempts)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
            [Jsonb(args), Jsonb(meta or {}), queue, INVOKE_WORKER, state, attempt, max_attempts],
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
