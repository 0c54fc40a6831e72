"""Growth benchmark: what a step, a show, a list page and a cancel cost with a million
executions in the tables, against the same with a thousand.

Run from the repository root::

    uv run python bench/growth.py [--quick] [--executions N] [--explain]

Goal (issue 25): with ``--executions`` (1,000,000) executions in the table, each with a
pending timer job, ``--history`` (10) history entries and the step keys of its timer
steps, each operation costs at most 1.3x what it costs with ``--small`` (1,000).

Two databases on one server: ``small`` and ``big``. Each gets its rows in bulk
(``bench/growth_fill.sql``: ``INSERT ... SELECT`` over ``generate_series``, cloned from a
template execution the API created, in chunks), is vacuumed and analysed, and gets the
same probe executions through the API (the clones are never loaded: their positions
name the template's session). Then, round after round, each operation runs on both
databases, call by call in turns (the first of each pair alternating), and every call is
timed:

- **step**: ``Executions.fire`` of the probe's pending timer with a job key, as a worker
  delivers it (the locked read with the key check, the drive, the next timer's insert,
  the store with its key and history entry, commit);
- **show**: what ``statifier-oban executions show`` reads: ``Executions.load``, the
  execution's pending jobs (``statifier_oban.executions.pending_jobs``) and its fan-outs;
- **list**: ``Executions.list(status="active")``, a page of 50: the first page, and a
  page from the middle of the table (``after=`` an id half-way);
- **cancel**: ``Executions.cancel`` of a fresh probe (its onexit, its timer job cancelled,
  stored ``cancelled``);
- **history** (context): the last 20 entries of a probe (``Executions.history``).

The verdict of each operation reads the median call on ``big`` over the median on
``small``. The report ends with each table's size per execution (heap, TOAST, indexes)
and, with ``--explain``, the plan of every statement each operation runs on ``big``
(``auto_explain`` at NOTICE level on the bench's connections: ``EXPLAIN ANALYZE`` with
buffers).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import re
import statistics
import sys
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import statifier
from oban import Oban
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg_pool import AsyncConnectionPool
from statifier.core.effects import SendDelayed
from statifier_oban.embedded import EmbeddedPostgres
from statifier_oban.executions import ObanExecutor, execution_config, pending_jobs
from statifier_oban.schema import install
from statifier_persistence import Executions, Stepped
from statifier_persistence import install as install_persistence

TARGET = 1.3
"""Big / small, per operation, must be at most this."""

QUEUE = "timers"

CHART = statifier.compile(
    """<scxml xmlns="http://www.w3.org/2005/07/scxml" name="growth_ticker" initial="s">
  <datamodel><data id="n" expr="0"/></datamodel>
  <state id="s">
    <onentry><send id="tick" event="tick" delay="1h"/></onentry>
    <onexit><log label="stopped" expr="n"/></onexit>
    <transition event="tick">
      <assign location="n" expr="n + 1"/>
      <send id="tick" event="tick" delay="1h"/>
    </transition>
  </state>
</scxml>"""
)
"""Every fired ``tick`` counts and arms the next timer, an hour out; a cancel logs."""

FILL_SQL = Path(__file__).with_name("growth_fill.sql")
FILL_STATEMENTS = ("executions", "timers", "history", "keys")
TABLES = ("statifier_executions", "statifier_step_keys", "statifier_history", "oban_jobs")

OPERATIONS = ("step", "show", "list first page", "list middle page", "cancel", "history")
GOALS = frozenset({"step", "show", "list first page", "list middle page", "cancel"})
"""The operations with a verdict (history is context)."""


def fill_statements() -> dict[str, str]:
    """The named statements of ``growth_fill.sql``."""
    parts = re.split(r"^-- name: (\w+)\n", FILL_SQL.read_text(), flags=re.MULTILINE)
    return {
        name: body.strip().rstrip(";") for name, body in zip(parts[1::2], parts[2::2], strict=True)
    }


@dataclass
class Database:
    """One database of the run: its executions API, its oban client, its probes."""

    label: str
    url: str
    count: int
    pool: AsyncConnectionPool[Any]
    oban: Oban
    executions: Executions
    steppers: list[str] = field(default_factory=list)
    pending: dict[str, SendDelayed] = field(default_factory=dict)
    cancels: list[str] = field(default_factory=list)
    keys: int = 0
    middle: str = ""

    async def close(self) -> None:
        """Close the pool."""
        await self.pool.close()


def pending_timer(stepped: Stepped) -> SendDelayed:
    """The timer a step armed."""
    for effect in stepped.effects:
        if isinstance(effect, SendDelayed):
            return effect
    raise RuntimeError(f"{stepped!r} armed no timer")


async def open_database(label: str, url: str, count: int) -> Database:
    """Connect to a database (installed already)."""
    pool = AsyncConnectionPool(url, min_size=2, max_size=6, open=False)
    await pool.open(wait=True)
    oban = Oban(pool=pool, name=f"growth_{label}_{uuid.uuid4().hex[:6]}")
    config = execution_config(oban, timers_queue=QUEUE)
    executions = Executions(pool, executor=ObanExecutor(config))
    return Database(label, url, count, pool, oban, executions)


async def fill(db: Database, args: argparse.Namespace) -> float | None:
    """The template, the bulk rows (in chunks) and vacuum; the seconds it took (None: the
    database was filled already, ``--reuse``)."""
    began = time.perf_counter()
    db.middle = f"fill_{db.count // 2:08d}"
    async with db.pool.connection() as conn:
        filled = await (
            await conn.execute("SELECT 1 FROM statifier_executions WHERE id = %s", [db.middle])
        ).fetchone()
    if filled is not None:  # --reuse: filled by an earlier run
        return None
    created = await db.executions.create(CHART, execution_id="template")
    await db.executions.fire("template", pending_timer(created), key="job:template")
    async with db.pool.connection() as conn:
        row = await (
            await conn.execute(
                "SELECT max(id) FROM oban_jobs WHERE args->>'scope' = 'template'"
                " AND state = 'scheduled'"
            )
        ).fetchone()
    assert row is not None  # noqa: S101 - an aggregate always answers
    job = row[0]
    statements = fill_statements()
    chunk = args.chunk
    for start in range(0, db.count, chunk):
        stop = min(start + chunk, db.count)
        params = {
            "start": start,
            "stop": stop,
            "template": "template",
            "job": job,
            "history": args.history,
        }
        async with db.pool.connection() as conn:
            for name in FILL_STATEMENTS:
                await conn.execute(statements[name], params)
        if db.count > chunk:
            print(f"  {db.label}: {stop:,} of {db.count:,} executions", file=sys.stderr, flush=True)
    async with db.pool.connection() as conn:
        await conn.set_autocommit(True)
        for table in TABLES:
            await conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(table)))
    return time.perf_counter() - began


async def add_probes(db: Database, args: argparse.Namespace) -> None:
    """The executions the operations run on, created through the API (same ids in every
    database): steppers stepped ``--history - 2`` more times, and one to cancel per
    cancel call."""
    tag = uuid.uuid4().hex[:6]
    for i in range(args.probes):
        execution_id = f"probe_{tag}_step_{i:03d}"
        stepped = await db.executions.create(CHART, execution_id=execution_id)
        for _ in range(args.history - 2):
            delayed = pending_timer(stepped)
            stepped = await fire(db, execution_id, delayed)
            await complete_job(db, execution_id, delayed)
        db.steppers.append(execution_id)
        db.pending[execution_id] = pending_timer(stepped)
    for i in range((args.rounds + 1) * args.calls + 1):  # and one for --explain
        execution_id = f"probe_{tag}_cancel_{i:04d}"
        await db.executions.create(CHART, execution_id=execution_id)
        db.cancels.append(execution_id)


async def fire(db: Database, execution_id: str, delayed: SendDelayed) -> Stepped:
    """Fire a timer as a worker does: with a job key."""
    db.keys += 1
    result = await db.executions.fire(execution_id, delayed, key=f"job:probe{db.keys}")
    if not isinstance(result, Stepped):
        raise RuntimeError(f"{execution_id}: the fire answered {result!r}")
    return result


Operation = Callable[[Database, int], Awaitable[float | None]]
"""One call of an operation; it may answer the seconds of its timed part itself."""


async def op_step(db: Database, n: int) -> float:
    """Fire the pending timer of a stepper; then (untimed) complete its job, as the worker's
    acknowledgement would."""
    execution_id = db.steppers[n % len(db.steppers)]
    delayed = db.pending[execution_id]
    began = time.perf_counter()
    stepped = await fire(db, execution_id, delayed)
    seconds = time.perf_counter() - began
    db.pending[execution_id] = pending_timer(stepped)
    await complete_job(db, execution_id, delayed)
    return seconds


async def complete_job(db: Database, execution_id: str, delayed: SendDelayed) -> None:
    """Mark the job of a fired timer completed."""
    async with db.pool.connection() as conn:
        await conn.execute(
            "UPDATE oban_jobs SET state = 'completed', completed_at = timezone('UTC', now())"
            " WHERE worker = 'statifier_oban.workers.TimerWorker'"
            " AND args->>'scope' = %s AND args->>'ordinal' = %s",
            [execution_id, str(delayed.ordinal)],
        )


async def op_show(db: Database, n: int) -> None:
    """What ``executions show`` reads."""
    execution, _ = await db.executions.load(db.steppers[n % len(db.steppers)])
    jobs = await pending_jobs(db.oban, execution.id)
    if not jobs:
        raise RuntimeError(f"{execution.id} has no pending job")
    await db.executions.fan_outs(execution.id)


async def op_list_first(db: Database, n: int) -> None:
    """The first page of active executions."""
    page = await db.executions.list(status="active", limit=50)
    if len(page.executions) != 50:
        raise RuntimeError(f"a page of {len(page.executions)} executions")


async def op_list_middle(db: Database, n: int) -> None:
    """A page of active executions from the middle of the table."""
    page = await db.executions.list(status="active", limit=50, after=db.middle)
    if len(page.executions) != 50:
        raise RuntimeError(f"a page of {len(page.executions)} executions")


async def op_cancel(db: Database, n: int) -> None:
    """Cancel the next fresh probe."""
    result = await db.executions.cancel(db.cancels.pop())
    if not isinstance(result, Stepped) or result.execution.status != "cancelled":
        raise RuntimeError(f"the cancel answered {result!r}")


async def op_history(db: Database, n: int) -> None:
    """The last 20 history entries of a stepper."""
    page = await db.executions.history(db.steppers[n % len(db.steppers)], before=2**62, limit=20)
    if not page.entries:
        raise RuntimeError("no history")


OPERATION_CALLS: dict[str, Operation] = {
    "step": op_step,
    "show": op_show,
    "list first page": op_list_first,
    "list middle page": op_list_middle,
    "cancel": op_cancel,
    "history": op_history,
}


async def measure(
    dbs: Sequence[Database], args: argparse.Namespace
) -> dict[str, dict[str, list[float]]]:
    """Every call's seconds, per operation and database: a warm-up round, then
    ``--rounds`` rounds. The databases take turns call by call (so the two calls of a
    pair see the same machine), the first of each pair alternating."""
    times: dict[str, dict[str, list[float]]] = {
        op: {db.label: [] for db in dbs} for op in OPERATIONS
    }
    for round_number in range(args.rounds + 1):
        for op in OPERATIONS:
            call = OPERATION_CALLS[op]
            for n in range(args.calls):
                order = list(dbs) if n % 2 == 0 else list(reversed(dbs))
                for db in order:
                    began = time.perf_counter()
                    seconds = await call(db, round_number * args.calls + n)
                    if seconds is None:
                        seconds = time.perf_counter() - began
                    if round_number > 0:
                        times[op][db.label].append(seconds)
    return times


async def sizes(db: Database) -> list[tuple[str, int, int, int, int]]:
    """Per table: rows, heap bytes, TOAST bytes, index bytes."""
    found = []
    async with db.pool.connection() as conn:
        for table in TABLES:
            cursor = await conn.execute(
                "SELECT reltuples::bigint, pg_relation_size(c.oid),"
                " COALESCE(pg_total_relation_size(c.reltoastrelid), 0),"
                " pg_indexes_size(c.oid)"
                " FROM pg_class AS c WHERE c.oid = %s::regclass",
                [table],
            )
            row = await cursor.fetchone()
            assert row is not None  # noqa: S101 - the table exists
            found.append((table, *row))
    return found


async def explain(db: Database) -> dict[str, list[str]]:
    """The plans of every statement each operation runs on ``db``: the operations run once
    more on connections where ``auto_explain`` sends each plan as a notice."""
    notices: list[str] = []

    async def configure(conn: psycopg.AsyncConnection[Any]) -> None:
        conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
        await conn.set_autocommit(True)
        for setting in EXPLAIN_SETTINGS:
            await conn.execute(setting)
        await conn.set_autocommit(False)

    pool = AsyncConnectionPool(db.url, min_size=1, max_size=4, open=False, configure=configure)
    await pool.open(wait=True)
    oban = Oban(pool=pool, name=f"growth_explain_{uuid.uuid4().hex[:6]}")
    executions = Executions(pool, executor=ObanExecutor(execution_config(oban, timers_queue=QUEUE)))
    explained = dataclasses.replace(db, pool=pool, oban=oban, executions=executions)
    plans: dict[str, list[str]] = {}
    try:
        for op in OPERATIONS:
            notices.clear()
            await OPERATION_CALLS[op](explained, 0)
            plans[op] = [notice for notice in notices if "Query Text" in notice]
    finally:
        await pool.close()
    return plans


EXPLAIN_SETTINGS = (
    "LOAD 'auto_explain'",
    "SET auto_explain.log_min_duration = 0",
    "SET auto_explain.log_analyze = on",
    "SET auto_explain.log_buffers = on",
    "SET auto_explain.log_nested_statements = on",
    "SET auto_explain.log_level = notice",
    "SET client_min_messages = notice",
)
"""What ``--explain`` sets on its connections (the embedded server's user may LOAD)."""


async def run(args: argparse.Namespace) -> int:
    """The whole benchmark; the exit status."""
    embedded = None if args.database_url else EmbeddedPostgres.start()
    admin = args.database_url or (embedded.url if embedded else "")
    tag = "kept" if args.reuse else uuid.uuid4().hex[:8]
    counts = {"small": args.small, "big": args.executions}
    names = {
        label: f"statifier_growth_{label}_{counts[label]}_{args.history}_{tag}" for label in counts
    }
    with psycopg.connect(admin, autocommit=True) as conn:
        for name in names.values():
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
            if found.fetchone() is None:
                conn.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(name))
                )
    dbs: list[Database] = []
    try:
        for label, name in names.items():
            url = make_conninfo(admin, dbname=name)
            await install(url)
            await install_persistence(url)
            dbs.append(await open_database(label, url, counts[label]))
        return await report(dbs, args)
    finally:
        for db in dbs:
            await db.close()
        if not args.reuse:
            with psycopg.connect(admin, autocommit=True) as conn:
                for name in names.values():
                    conn.execute(
                        sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                            sql.Identifier(name)
                        )
                    )
        if embedded is not None:
            embedded.stop()


async def report(dbs: list[Database], args: argparse.Namespace) -> int:
    """Fill, measure and print."""
    print(
        f"statifier growth benchmark: {args.small:,} against {args.executions:,} executions, "
        f"{args.history} history entries each; {args.rounds} rounds of {args.calls} calls "
        f"per operation; load average {os.getloadavg()[0]:.1f}\n"
    )
    for db in dbs:
        seconds = await fill(db, args)
        await add_probes(db, args)
        done = "reused" if seconds is None else f"filled in {seconds:.0f} s"
        print(f"  {db.label}: {db.count:,} executions {done}")
    times = await measure(dbs, args)
    small, big = dbs
    print("\n1. operations (median call, ms)\n")
    print(f"  {'operation':<18} {'small':>9} {'big':>9}  {'big/small':>9}  verdict")
    failed = False
    for op in OPERATIONS:
        a = statistics.median(times[op][small.label]) * 1000
        b = statistics.median(times[op][big.label]) * 1000
        ratio = b / a
        verdict = "-"
        if op in GOALS:
            verdict = "PASS" if ratio <= TARGET else "BELOW"
            failed = failed or verdict != "PASS"
        print(f"  {op:<18} {a:9.2f} {b:9.2f}  {ratio:9.2f}  {verdict}")
    print(f"\n  goal: each operation with {args.executions:,} executions at most {TARGET}x")
    print(f"  its cost with {args.small:,} (big/small of the median call)")
    print("\n2. size on disk per execution (big)\n")
    print(f"  {'table':<22} {'rows':>12} {'heap B':>9} {'TOAST B':>9} {'index B':>9}")
    total = 0.0
    for table, rows, heap, toast, index in await sizes(big):
        per = [value / big.count for value in (heap, toast, index)]
        total += sum(per)
        print(f"  {table:<22} {rows:12,} {per[0]:9.0f} {per[1]:9.0f} {per[2]:9.0f}")
    print(f"  {'all':<22} {'':>12} {total:9.0f} bytes per execution")
    if args.explain:
        print("\n3. plans on big (auto_explain)\n")
        for op, plans in (await explain(big)).items():
            print(f"--- {op}")
            for plan in plans:
                print(plan)
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    return 0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100,000 executions, 3 rounds")
    parser.add_argument("--executions", type=int, default=1_000_000, help="the big database")
    parser.add_argument("--small", type=int, default=1_000, help="the small database")
    parser.add_argument("--history", type=int, default=10, help="history entries per execution")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds")
    parser.add_argument("--calls", type=int, default=20, help="calls per operation per round")
    parser.add_argument("--probes", type=int, default=20, help="executions stepped and shown")
    parser.add_argument("--chunk", type=int, default=100_000, help="executions per fill chunk")
    parser.add_argument("--explain", action="store_true", help="print the plans on big")
    parser.add_argument("--database-url", default=None, help="server to use (default: embedded)")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="keep the databases (named by their sizes) and fill them only once; with "
        "--database-url, for measuring again after a change",
    )
    args = parser.parse_args(argv)
    if args.reuse and not args.database_url:
        parser.error("--reuse needs --database-url (the embedded server is deleted at the end)")
    if args.quick:
        args.executions, args.rounds = 100_000, 3
    if args.history < 2:
        parser.error("--history must be at least 2 (a creation and a step)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark."""
    args = parse_args(argv)
    try:
        return asyncio.run(run(args))
    except Exception:
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main())
