"""The fan-out tests' rig: one database per module, a real Oban per test, rows and telemetry.

Creating a database costs 0.5-1 s, so ``test_fan_out`` shares one per module (copied from
conftest's ``template_database``) while every test gets its own pool, its own server-mode
Oban running a queue of its own (``Rig.start``), and scopes of its own. Rows of other tests
sit in the same table on queues nobody runs; every query here filters on scope.

The workers run in the test process and resolve ``oban_support.fanout_seams:Name`` paths
named on job rows through the tests' own import path. What the timer, invoke and fan-out
tests share (``JobRow``, ``wait_for_state``, ``insert_row``, telemetry capture, polling) lives
in ``oban_support.common``; the ``Rig`` methods below are its fan-out-shaped front ends.
"""

from __future__ import annotations

from typing import Any

from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier.core.effects import Invoke
from statifier_oban._config import Config
from statifier_oban._names import CHILD_START_WORKER, INVOKE_WORKER
from statifier_oban.invocations import _args

import oban_support.fanout_seams as seams
from oban_support.common import (
    DEADLINE_S,
    JobRow,
    execute,
    forget_instance,
    insert_row,
    job_row,
    job_rows,
    unique,
    wait_for_state,
    wait_until,
)


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
    return _args.encode(scope, seams.HANDLER_PATH, invoke, None)


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
                    forget_instance(self.server)
            if self.client is not None:
                forget_instance(self.client)
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
        return await job_rows(
            self.pool,
            "worker = %s AND args->>'scope' = %s ORDER BY (args->>'index')::int NULLS FIRST, id",
            [worker, scope],
        )

    async def row(self, job_id: int) -> JobRow:
        """The row of job ``job_id`` (it must exist)."""
        return await job_row(self.pool, job_id)

    async def wait_state(self, job_id: int, *states: str, timeout: float = DEADLINE_S) -> JobRow:
        """Poll job ``job_id`` until its state is one of ``states``; return the row."""
        return await wait_for_state(self.pool, job_id, *states, timeout=timeout)

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
        return await insert_row(
            self.pool, args, meta=meta, worker=worker, queue=queue or self.queue, state=state
        )

    async def execute(self, statement: Any, params: Any = None) -> None:
        """Run one statement on a pooled connection (committed on return)."""
        await execute(self.pool, statement, params)


INVOKE_ROWS = INVOKE_WORKER
"""Pass as ``worker`` to ``Rig.rows`` for the invocation rows of a scope."""
