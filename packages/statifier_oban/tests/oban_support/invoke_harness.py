"""Harness of the invoke integration tests.

* One database per test module (``oban_support.common.module_database``, copied from
  conftest's ``template_database``): copying costs 0.5-1 s, so the tests of a module share it and
  isolate on scope and queue names, as the reference suite does.
* ``InvokeEnv`` (one per test): an open pool, a client-mode ``Oban`` for enqueueing onto
  queues nobody runs, and ``server(queue)`` for real server-mode instances that run a
  queue with the real ``InvokeWorker``. Everything it starts is stopped at the end.
* Invocation-specific row helpers; the shared ones (``JobRow``, ``job_row``,
  ``wait_for_state``, ``insert_row``, telemetry capture, polling, ``Sessions``) live in
  ``oban_support.common``.

The worker runs in the test process and resolves ``oban_support.invoke_handlers:CaptureHandler``
and friends from job rows through the tests' own import path (pytest's ``pythonpath``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from typing import Any

import pytest_asyncio
from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier.core.effects import Invoke
from statifier_oban import Config

from oban_support.common import JobRow, execute, forget_instance, job_rows, unique
from oban_support.invoke_handlers import use_config

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


# --- pools and Oban instances ---------------------------------------------------------------


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
                forget_instance(instance)
        forget_instance(self.client)
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


# --- job rows -------------------------------------------------------------------------------


async def invoke_rows(pool: AsyncConnectionPool, scope: str) -> list[JobRow]:
    """Every row of ``scope`` whatever its worker (invocation rows have ``args.scope``)."""
    return await job_rows(pool, "args->>'scope' = %s ORDER BY id", [scope])


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


# --- fixtures -------------------------------------------------------------------------------


def env_fixture() -> Any:
    """A fixture ``env`` on the module's ``database``: the ``InvokeEnv`` of one test.

    Use as ``env = env_fixture()`` in a test module.
    """

    @pytest_asyncio.fixture(name="env")
    async def env(database: str) -> AsyncIterator[InvokeEnv]:
        """Pool, client Oban and server factory of one test."""
        async with invoke_env(database) as env:
            yield env

    return env
