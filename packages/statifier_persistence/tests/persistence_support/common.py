"""Helpers of the statifier_persistence tests.

``TableExecutor`` is a real durable executor without oban: every effect it performs is a
row in ``test_effects``, written on the step's own connection, so a rolled-back step
leaves no row (which is what the tests check). It can refuse an effect kind
(``EffectRefused``) or fail after writing (a failed durable write).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Sequence
from typing import Any, Final

import statifier
from psycopg import AsyncConnection
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from statifier.core import effects as fx
from statifier.core.events import Event
from statifier.core.planner import Deliver
from statifier_persistence import (
    EffectRefused,
    Execution,
    ExecutionNotFound,
    Executions,
    FanOutKey,
    install,
)

NS = 'xmlns="http://www.w3.org/2005/07/scxml"'

TEST_TABLES = """
CREATE TABLE test_effects (
    id bigserial PRIMARY KEY,
    execution_id text NOT NULL,
    kind text NOT NULL,
    send_id text,
    ordinal integer,
    invoke_id text,
    detail jsonb,
    cancelled boolean NOT NULL DEFAULT false
);
CREATE TABLE test_outbox (
    id bigserial PRIMARY KEY,
    execution_id text NOT NULL,
    target text NOT NULL,
    event text NOT NULL
);
"""


async def install_with_test_tables(url: str) -> None:
    """The persistence tables plus the tables of the test executor and host."""
    await install(url)
    async with await AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(TEST_TABLES)


def chart(body: str, **attrs: str) -> statifier.Machine:
    """Compile an SCXML chart (Python datamodel) from its ``<scxml>`` body."""
    extra = " ".join(f'{key}="{value}"' for key, value in attrs.items())
    return statifier.compile(f"<scxml {NS} {extra}>{body}</scxml>")


def unique(kind: str = "exec") -> str:
    """An execution id (or other name) no other test uses."""
    return f"{kind}_{uuid.uuid4().hex[:12]}"


class InjectedFailure(RuntimeError):
    """The test executor failing after its write, as a database write might."""


class TableExecutor:
    """Performs durable effects as ``test_effects`` rows on the step's connection.

    ``refuse`` holds effect kinds it refuses (``EffectRefused``, before writing); ``fail``
    kinds it fails on after writing (the step must roll the row back). Kinds:
    ``schedule``, ``cancel``, ``invoke``, ``stop``, ``forward``. ``timers`` keeps every
    scheduled effect by ``(execution_id, ordinal)`` so a test can fire it.
    """

    def __init__(self, invoke_types: Iterable[str] = ("test:job",)) -> None:
        self._invoke_types = frozenset(invoke_types)
        self.refuse: set[str] = set()
        self.fail: set[str] = set()
        self.forwards = False
        self.timers: dict[tuple[str, int], fx.SendDelayed] = {}

    @property
    def invoke_types(self) -> frozenset[str]:
        """The invoke types this executor starts."""
        return self._invoke_types

    async def _write(self, conn: AsyncConnection[Any], kind: str, **row: Any) -> None:
        if kind in self.refuse:
            raise EffectRefused(f"{kind} refused by the test executor")
        params = {"send_id": None, "ordinal": None, "invoke_id": None, "detail": None, **row}
        await conn.execute(
            "INSERT INTO test_effects (execution_id, kind, send_id, ordinal, invoke_id, detail)"
            " VALUES (%(execution_id)s, %(kind)s, %(send_id)s, %(ordinal)s, %(invoke_id)s,"
            " %(detail)s)",
            {**params, "kind": kind},
        )
        if kind in self.fail:
            raise InjectedFailure(f"{kind} failed after writing")

    async def schedule(
        self, conn: AsyncConnection[Any], execution_id: str, effect: fx.SendDelayed
    ) -> None:
        """A ``schedule`` row; the effect is kept for ``fire``."""
        await self._write(
            conn,
            "schedule",
            execution_id=execution_id,
            send_id=effect.send_id,
            ordinal=effect.ordinal,
            detail=Jsonb({"event": effect.event, "delay_ms": effect.delay_ms}),
        )
        self.timers[(execution_id, effect.ordinal)] = effect

    async def cancel_timers(
        self, conn: AsyncConnection[Any], execution_id: str, effect: fx.Cancel
    ) -> None:
        """Mark the pending ``schedule`` rows of the send id cancelled; a ``cancel`` row."""
        await conn.execute(
            "UPDATE test_effects SET cancelled = true WHERE kind = 'schedule'"
            " AND execution_id = %s AND send_id = %s",
            [execution_id, effect.send_id],
        )
        await self._write(
            conn,
            "cancel",
            execution_id=execution_id,
            send_id=effect.send_id,
            ordinal=effect.ordinal,
        )

    async def start_invocation(
        self, conn: AsyncConnection[Any], execution_id: str, effect: fx.Invoke
    ) -> None:
        """An ``invoke`` row (its detail: type, params and the invoking macrostep)."""
        detail = {"type": effect.type, "params": effect.params, "macrostep": effect.macrostep}
        await self._write(
            conn,
            "invoke",
            execution_id=execution_id,
            invoke_id=effect.invoke_id,
            detail=Jsonb(detail),
        )

    async def stop_invocation(
        self, conn: AsyncConnection[Any], execution_id: str, effect: fx.CancelInvoke
    ) -> None:
        """A ``stop`` row."""
        await self._write(conn, "stop", execution_id=execution_id, invoke_id=effect.invoke_id)

    async def forward(
        self, conn: AsyncConnection[Any], execution_id: str, invoke_id: str, event: Event
    ) -> bool:
        """A ``forward`` row when ``forwards`` is set; otherwise refuses (False)."""
        if not self.forwards:
            return False
        await self._write(
            conn,
            "forward",
            execution_id=execution_id,
            invoke_id=invoke_id,
            detail=Jsonb({"event": event.name}),
        )
        return True


class BatchingTableExecutor(TableExecutor):
    """A ``TableExecutor`` that stores timers in batches (``TimerBatches``): a prepared
    timer is checked as ``schedule`` checks it (``refuse``), and ``store_timers`` writes
    the ``schedule`` rows of every prepared timer with one statement (then fails, with
    ``fail``). ``stored`` holds the size of each ``store_timers`` call."""

    def __init__(self, invoke_types: Iterable[str] = ("test:job",)) -> None:
        super().__init__(invoke_types)
        self.stored: list[int] = []

    @property
    def timer_batches(self) -> bool:
        """Steps prepare and store their timers."""
        return True

    def prepare_timer(
        self, execution_id: str, effect: fx.SendDelayed
    ) -> tuple[str, fx.SendDelayed]:
        """The timer, checked."""
        if "schedule" in self.refuse:
            raise EffectRefused("schedule refused by the test executor")
        return execution_id, effect

    async def store_timers(
        self, conn: AsyncConnection[Any], timers: Sequence[tuple[str, fx.SendDelayed]]
    ) -> None:
        """One statement for every timer's ``schedule`` row."""
        self.stored.append(len(timers))
        await conn.execute(
            "INSERT INTO test_effects (execution_id, kind, send_id, ordinal, detail)"
            " SELECT e, 'schedule', s, o, d FROM unnest(%s::text[], %s::text[], %s::int[],"
            " %s::jsonb[]) AS t (e, s, o, d)",
            [
                [execution_id for execution_id, _ in timers],
                [effect.send_id for _, effect in timers],
                [effect.ordinal for _, effect in timers],
                [Jsonb({"event": e.event, "delay_ms": e.delay_ms}) for _, e in timers],
            ],
        )
        for execution_id, effect in timers:
            self.timers[(execution_id, effect.ordinal)] = effect
        if "schedule" in self.fail:
            raise InjectedFailure("store_timers failed after writing")


class FanOutTableExecutor(TableExecutor):
    """A ``TableExecutor`` that runs fan-outs: a settlement is a ``settle`` row, a cascade
    a ``cascade`` row (``invoke_id`` set, ``detail`` the generation), in the transaction;
    a generation is superseded once an ``invoke`` row of a later macrostep exists."""

    async def settle_fan_out(self, conn: AsyncConnection[Any], fan_out: FanOutKey) -> None:
        """A ``settle`` row."""
        await self._fan_out_row(conn, "settle", fan_out)

    async def cancel_children(self, conn: AsyncConnection[Any], fan_out: FanOutKey) -> None:
        """A ``cascade`` row."""
        await self._fan_out_row(conn, "cascade", fan_out)

    async def superseded(self, conn: AsyncConnection[Any], fan_out: FanOutKey) -> bool:
        """Whether an ``invoke`` row of a later macrostep has the fan-out's invoke id."""
        cursor = await conn.execute(
            "SELECT count(*) FROM test_effects WHERE kind = 'invoke' AND execution_id = %s"
            " AND invoke_id = %s AND (detail->>'macrostep')::int > %s",
            [fan_out.parent_id, fan_out.invoke_id, fan_out.generation],
        )
        row = await cursor.fetchone()
        return row is not None and row[0] > 0

    async def _fan_out_row(self, conn: AsyncConnection[Any], kind: str, key: FanOutKey) -> None:
        await self._write(
            conn,
            kind,
            execution_id=key.parent_id,
            invoke_id=key.invoke_id,
            detail=Jsonb({"generation": key.generation}),
        )


class OutboxHost:
    """A host that reaches ``#_parent`` and ``#_scxml_*`` sessions through ``test_outbox``
    rows (written in the step's transaction), and records reports in ``reported``."""

    def __init__(self, routes: Iterable[str] = ("#_parent",)) -> None:
        self._routes = frozenset(routes)
        self.reported: list[tuple[str, fx.Log | fx.ErrorRaised]] = []

    def routes(self, execution: Execution) -> frozenset[str]:
        """The configured targets."""
        return self._routes

    async def deliver(
        self, conn: AsyncConnection[Any], execution: Execution, instruction: Deliver
    ) -> bool:
        """One ``test_outbox`` row per delivered send."""
        await conn.execute(
            "INSERT INTO test_outbox (execution_id, target, event) VALUES (%s, %s, %s)",
            [execution.id, type(instruction.target).__name__, instruction.event.name],
        )
        return True

    def report(self, execution: Execution, effect: fx.Log | fx.ErrorRaised) -> None:
        """Remember the report."""
        self.reported.append((execution.id, effect))


async def effect_rows(
    pool: AsyncConnectionPool, execution_id: str
) -> list[tuple[str, str | None, int | None, str | None, bool]]:
    """``(kind, send_id, ordinal, invoke_id, cancelled)`` of the execution's effect rows."""
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT kind, send_id, ordinal, invoke_id, cancelled FROM test_effects"
            " WHERE execution_id = %s ORDER BY id",
            [execution_id],
        )
        return list(await cursor.fetchall())


async def scalar(pool: AsyncConnectionPool, query: Any, params: Any = None) -> Any:
    """The first column of the first row of ``query``."""
    async with pool.connection() as conn:
        row = await (await conn.execute(query, params)).fetchone()
    assert row is not None
    return row[0]


async def blocked_by(pool: AsyncConnectionPool, pid: int, *, timeout: float = 30.0) -> None:
    """Return once a backend of this database waits for a lock that backend ``pid``'s
    transaction holds; fail after ``timeout`` s.

    The event a test of a lock wait needs before it lets the holder go: a step started
    beside the holder may not have reached the lock yet (its connection, its first reads),
    and on a loaded machine no fixed sleep is long enough to be sure.
    """
    query = (
        "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))"
        " AND datname = current_database()"
    )
    try:
        async with asyncio.timeout(timeout):
            while await scalar(pool, query, [pid]) == 0:
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"nothing waited for a lock of backend {pid} in {timeout} s") from None


class MailboxTableExecutor(FanOutTableExecutor):
    """A ``FanOutTableExecutor`` that runs invoked charts: a message's delivery is a
    ``deliver`` row (``execution_id`` the receiver), in the sender's transaction; dropped
    timers a ``drop`` row per send id. ``pump`` plays the deliveries as jobs would."""

    async def deliver_message(self, conn: AsyncConnection[Any], execution_id: str) -> None:
        """A ``deliver`` row for the receiver."""
        await self._write(conn, "deliver", execution_id=execution_id)

    async def drop_timers(
        self, conn: AsyncConnection[Any], execution_id: str, send_ids: Sequence[str]
    ) -> None:
        """A ``drop`` row per send id; the send's ``schedule`` rows marked cancelled."""
        for send_id in send_ids:
            await conn.execute(
                "UPDATE test_effects SET cancelled = true WHERE kind = 'schedule'"
                " AND execution_id = %s AND send_id = %s",
                [execution_id, send_id],
            )
            await self._write(conn, "drop", execution_id=execution_id, send_id=send_id)


_TAKE = (
    "UPDATE test_effects SET cancelled = true WHERE id = (SELECT id FROM test_effects"
    " WHERE kind = 'deliver' AND NOT cancelled AND (execution_id = %(root)s OR execution_id"
    " IN (SELECT id FROM statifier_executions WHERE tree_root = %(root)s))"
    " ORDER BY id {} LIMIT 1)"
    " RETURNING id, execution_id"
)
_TAKE_OLDEST: Final = _TAKE.format("ASC")
_TAKE_NEWEST: Final = _TAKE.format("DESC")


async def pump(
    executions: Executions, root: str, *, newest_first: bool = False, limit: int = 200
) -> list[tuple[str, str]]:
    """Run every pending ``deliver`` row of the tree of invoked charts under ``root`` (and
    those they write) as a job would, keyed by the row, oldest first (``newest_first``:
    the other way round, as racing workers might); returns ``(receiver, answer)`` per
    delivery, the answer the result's class name (and a declined one's reason)."""
    pool = executions.pool
    assert pool is not None
    answers: list[tuple[str, str]] = []
    take = _TAKE_NEWEST if newest_first else _TAKE_OLDEST
    for _ in range(limit):
        async with pool.connection() as conn:
            cursor = await conn.execute(take, {"root": root})
            row = await cursor.fetchone()
        if row is None:
            return answers
        job_id, receiver = row
        try:
            result = await executions.receive(receiver, key=f"deliver:{job_id}")
        except ExecutionNotFound:
            answers.append((receiver, "ExecutionNotFound"))
            continue
        reason = getattr(result, "reason", None)
        answers.append((receiver, type(result).__name__ + (f":{reason}" if reason else "")))
    raise AssertionError(f"deliveries still pending after {limit}")
