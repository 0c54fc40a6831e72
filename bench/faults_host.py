"""The host module of ``bench/faults.py``'s worker processes (``--module faults_host``).

``statifier-oban worker --path bench --module faults_host`` imports it, which allows job
rows to name :class:`ChartDelivery` (ADR 13). Each fired timer is delivered into a chart
kept in PostgreSQL, with no live session (a process-less host, as a fleet of workers needs):

* ``fault_raw`` gets one row per delivery attempt that reached the chart's store (the row
  level: a timer run twice shows twice);
* ``fault_applied`` gets ``(scope, ordinal)`` once: a timer already applied is answered
  ``Delivered`` without touching the chart again (the idempotent delivery);
* otherwise the chart's position in ``fault_charts`` is loaded, the fired event goes through
  the engine (``handle_event``), and the new position is saved, counting the ``tick`` in the
  chart's own datamodel (``fired``): the chart level.

All three writes commit together. The delivery pauses up to ``FAULTS_DELIVERY_MS``
(environment, default 100 ms) in all, half before the writes and half after them, so a
worker killed mid-stream holds timers in both windows: not yet delivered, and delivered but
not yet acknowledged (those run again: a duplicate at the row level only).
"""

from __future__ import annotations

import asyncio
import os
import random
from typing import Any

import statifier
from psycopg_pool import AsyncConnectionPool
from statifier.core import planner
from statifier.core.algorithm import handle_event
from statifier.core.effects import SendDelayed
from statifier.core.position import dumps, loads
from statifier_oban import Delivered

CHART = statifier.compile(
    """<scxml xmlns="http://www.w3.org/2005/07/scxml" name="fault_counter">
      <datamodel><data id="fired" expr="0"/></datamodel>
      <state id="counting">
        <transition event="tick"><assign location="fired" expr="fired + 1"/></transition>
      </state>
    </scxml>"""
)
"""The chart every scope runs: it counts the ``tick`` events it receives."""

TABLES = """
CREATE TABLE IF NOT EXISTS fault_charts (
    scope text PRIMARY KEY,
    position bytea NOT NULL,
    fired integer NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS fault_applied (
    scope text NOT NULL,
    ordinal integer NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (scope, ordinal)
);
CREATE TABLE IF NOT EXISTS fault_raw (
    id bigserial PRIMARY KEY,
    scope text NOT NULL,
    ordinal integer NOT NULL,
    pid integer NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
"""
"""The host's tables (created by the benchmark before the workers start)."""

DELIVERY_MS = int(os.environ.get("FAULTS_DELIVERY_MS", "100"))
"""The longest pause a delivery takes before it writes (milliseconds)."""

_pool: AsyncConnectionPool | None = None


async def _connections() -> AsyncConnectionPool:
    """This process's pool on ``FAULTS_DATABASE_URL``, opened on first use."""
    global _pool
    if _pool is None:
        pool = AsyncConnectionPool(
            os.environ["FAULTS_DATABASE_URL"], open=False, min_size=1, max_size=6, timeout=5
        )
        await pool.open()
        _pool = pool
    return _pool


class ChartDelivery:
    """Feeds a fired timer into the scope's stored chart, once per ``(scope, ordinal)``."""

    async def deliver(self, scope: str, effect: SendDelayed) -> Any:
        """See the module docstring; a database error raises (oban retries the job)."""
        await asyncio.sleep(random.uniform(0, DELIVERY_MS / 2) / 1000)  # noqa: S311 - delivery jitter, not a secret
        await self._apply(scope, effect)
        await asyncio.sleep(random.uniform(0, DELIVERY_MS / 2) / 1000)  # noqa: S311 - delivery jitter, not a secret
        return Delivered()

    async def _apply(self, scope: str, effect: SendDelayed) -> None:
        """The three writes, in one transaction."""
        pool = await _connections()
        async with pool.connection() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO fault_raw (scope, ordinal, pid) VALUES (%s, %s, %s)",
                (scope, effect.ordinal, os.getpid()),
            )
            cursor = await conn.execute(
                "INSERT INTO fault_applied (scope, ordinal) VALUES (%s, %s) "
                "ON CONFLICT DO NOTHING RETURNING 1",
                (scope, effect.ordinal),
            )
            if await cursor.fetchone() is None:
                return  # applied before: the duplicate is absorbed here
            found = await conn.execute(
                "SELECT position FROM fault_charts WHERE scope = %s FOR UPDATE", (scope,)
            )
            row = await found.fetchone()
            if row is None:
                raise LookupError(f"no chart stored for scope {scope!r}")
            state = loads(bytes(row[0]), CHART)
            state, _effects = handle_event(state, planner.sent_event(scope, effect))
            await conn.execute(
                "UPDATE fault_charts SET position = %s, fired = %s WHERE scope = %s",
                (dumps(state), int(state.datamodel["fired"]), scope),
            )
