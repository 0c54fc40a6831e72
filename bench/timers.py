"""Timer benchmark: statifier_oban's durable timers against raw oban, in one run.

Run from the repository root::

    uv run python bench/timers.py [--quick] [--database-url CONNINFO]

Three measurements, each reported as a ratio against a peer measured in the same run
(see ``bench/README.md`` for the procedure and what every column means):

1. Insert throughput: ``_timer.schedule`` / ``_timer.schedule_many`` against an equivalent
   raw ``oban.enqueue`` / ``enqueue_many`` (same worker name, args and meta, scheduled
   1 h out), sequentially on pooled connections, inside one caller transaction, and in
   batches. Paths are interleaved slice by slice; the best of ``--repeats`` rounds counts.
2. Cancel latency: ``_timer.cancel_timers`` matching one job, with 1,000 and with 1,000,000
   pending timers in the table (two databases, cancels interleaved), plus ``EXPLAIN``.
3. Firing lateness: 1 and 2 worker processes (``bench/timers_worker.py``) running the
   timers queue with the default configuration (prompt stager), against the same
   workloads (stream, paced, sparse, burst) with oban's stock stager; both worker groups
   run at once on databases of their own, and the workloads alternate between them.

The embedded PostgreSQL server (``statifier_oban.embedded``) is used unless
``--database-url`` names a server; every measurement runs in fresh databases created
there and dropped at the end. The exit status is 1 only on a crash or a failed
verification; a missed target is reported (PASS/BELOW), not a failure.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import importlib.metadata
import os
import platform
import pstats
import random
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import statifier_oban
from oban import Oban
from oban.job import Job
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from statifier.core.effects import Cancel, SendDelayed
from statifier_oban import Config, _store, _timer, _timer_args
from statifier_oban._names import META_DELIVERY, TIMER_WORKER
from statifier_oban.embedded import EmbeddedPostgres
from statifier_oban.schema import TIMER_PENDING_INDEX, install

QUEUE = "timers"
"""The timers queue of every benchmark ``Config`` and worker."""

HOUR_MS = 3_600_000
ONE_HOUR = timedelta(hours=1)

INSERT_TARGET = 0.8
"""Ours/raw inserts per second must be at least this (our layer costs at most 25%)."""

CANCEL_TARGET = 3.0
"""Cancel latency with the big table over the small one must be at most this."""

LATENESS_TARGET_MS = 250.0
"""p99 firing lateness with the default configuration must be below this."""

WORKER_SCRIPT = Path(__file__).with_name("timers_worker.py")
DELIVERY_PATH = "timers_worker:RecordFire"
"""The recording delivery, resolved inside the worker processes."""

SCOPE_SIZE = 10
"""Timers per scope in the cancel tables (send ids ``t-0`` .. ``t-9``)."""

RAW_MULTI_ROW_SQL = """
INSERT INTO oban_jobs (args, meta, queue, worker, state, scheduled_at)
SELECT a, %(meta)s, %(queue)s, %(worker)s, 'scheduled',
       timezone('UTC', now()) + interval '1 hour'
FROM unnest(%(args)s::jsonb[]) AS a
RETURNING id
"""
"""Context only: one multi-row insert without dedup (no ON CONFLICT), as in the notes."""

LOAD_SQL = """
INSERT INTO oban_jobs (args, meta, queue, worker, state, scheduled_at)
SELECT %(template)s::jsonb || jsonb_build_object(
           'scope', 'bench-' || (i / %(per_scope)s),
           'ordinal', mod(i, %(per_scope)s) + 1,
           'send_id', 't-' || mod(i, %(per_scope)s)),
       %(meta)s::jsonb, %(queue)s, %(worker)s, 'scheduled',
       timezone('UTC', now()) + interval '1 hour'
FROM generate_series(0, %(rows)s - 1) AS i
"""
"""Pending timer rows shaped like ours: the args of a real encoded effect, with
``scope = bench-<i / 10>``, ``ordinal = i % 10 + 1``, ``send_id = t-<i % 10>``."""

FIRES_DDL = """
CREATE TABLE bench_fires (
    scope text NOT NULL,
    ordinal integer NOT NULL,
    node text NOT NULL,
    fired_at timestamp NOT NULL DEFAULT timezone('UTC', clock_timestamp())
)
"""

LATENESS_SQL = """
SELECT f.node,
       extract(epoch FROM f.fired_at - j.scheduled_at) * 1000,
       extract(epoch FROM j.attempted_at - j.scheduled_at) * 1000,
       extract(epoch FROM f.fired_at - j.attempted_at) * 1000,
       extract(epoch FROM f.fired_at), extract(epoch FROM j.scheduled_at)
FROM bench_fires AS f
JOIN oban_jobs AS j
  ON j.worker = %(worker)s AND j.args->>'scope' = f.scope
 AND j.args->>'ordinal' = f.ordinal::text
WHERE f.scope LIKE %(pattern)s
"""


# --------------------------------------------------------------------------- helpers


def make_effect(ordinal: int, delay_ms: int) -> SendDelayed:
    """A ``SendDelayed`` as a chart's ``<send delay>`` produces it (no data)."""
    return SendDelayed(
        event="bench.tick",
        target=None,
        type=None,
        data=None,
        send_id=f"t-{ordinal}",
        delay_ms=delay_ms,
        c_index=0,
        owner=("onentry", 1, 0),
        ordinal=ordinal,
        id_from_author=True,
        macrostep=1,
        microstep=1,
        round=0,
    )


def make_cancel(send_id: str, ordinal: int) -> Cancel:
    """A ``<cancel sendid>`` effect."""
    return Cancel(
        send_id=send_id,
        c_index=0,
        owner=("onentry", 1, 0),
        ordinal=ordinal,
        macrostep=1,
        microstep=1,
        round=0,
    )


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation; NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def verdict(ok: bool) -> str:
    """PASS or BELOW."""
    return "PASS" if ok else "BELOW"


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> None:
    """Print an aligned table; the first ``left`` columns are left-aligned, others right."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.ljust(w) if i < left else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  " + "  ".join(parts).rstrip()

    print(line(headers))
    print("  " + "  ".join("-" * w for w in widths))
    for row in rows:
        print(line(row))


def forget_oban(instance: Oban) -> None:
    """Drop ``instance`` from oban's global name registry (private, best effort)."""
    import oban.oban as oban_module

    registry = getattr(oban_module, "_instances", None)
    if isinstance(registry, dict) and registry.get(instance._name) is instance:
        del registry[instance._name]


class VerificationError(RuntimeError):
    """A benchmark check failed: the figures would be meaningless."""


# --------------------------------------------------------------------------- server


@dataclass
class Server:
    """The PostgreSQL server under test and the databases this run created on it."""

    url: str
    embedded: EmbeddedPostgres | None
    created: list[str] = field(default_factory=list)

    def url_for(self, database: str) -> str:
        """Conninfo of ``database`` on this server."""
        return make_conninfo(self.url, dbname=database)

    async def create_database(self, kind: str) -> str:
        """A fresh database with oban's schema and our indexes; returns its conninfo."""
        name = f"statifier_bench_{kind}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(name))
            )
        self.created.append(name)
        url = self.url_for(name)
        await install(url)
        return url

    def drop_database(self, url_or_name: str) -> None:
        """Drop one database this run created (``WITH (FORCE)``)."""
        name = next((n for n in self.created if url_or_name.endswith(n) or url_or_name == n), None)
        if name is None:
            return
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
        self.created.remove(name)

    def drop_all(self) -> None:
        """Drop every database this run created."""
        for name in list(self.created):
            try:
                self.drop_database(name)
            except psycopg.Error as exc:
                print(f"warning: could not drop database {name}: {exc}", file=sys.stderr)


async def open_pool(url: str, max_size: int = 4) -> AsyncConnectionPool:
    """An open pool on ``url`` with two warm connections."""
    pool = AsyncConnectionPool(url, min_size=min(2, max_size), max_size=max_size, open=False)
    await pool.open(wait=True)
    return pool


def make_client(pool: AsyncConnectionPool, name: str) -> tuple[Oban, Config]:
    """A client-mode ``Oban`` (never started) and our ``Config`` on it."""
    oban = Oban(pool=pool, name=f"bench_{name}_{uuid.uuid4().hex[:6]}")
    return oban, Config(oban=oban, timers_queue=QUEUE, delivery=DELIVERY_PATH)


# --------------------------------------------------------------------------- 1. inserts


@dataclass
class InsertContext:
    """What every insert path of one database shares."""

    pool: AsyncConnectionPool
    oban: Oban
    config: Config


class InsertPath:
    """One way to store ``n`` timers, run in slices ``[lo, hi)`` that the round times."""

    role = "ours"
    """``ours``, ``raw`` (the peer) or ``context`` (printed, never a target)."""

    def __init__(self, label: str, ctx: InsertContext) -> None:
        """Name the path; rounds are started with :meth:`start_round`."""
        self.label = label
        self.ctx = ctx
        self.scope = ""
        self.effects: list[SendDelayed] = []
        self.args: list[dict[str, Any]] = []
        self.runs: list[float] = []
        self.cpu: list[float] = []

    async def start_round(self, scope: str, n: int) -> None:
        """Build the round's inputs (untimed): effects, and their args for raw paths."""
        self.scope = scope
        self.effects = [make_effect(i + 1, HOUR_MS) for i in range(n)]
        self.args = [_timer_args.encode(scope, e, None) for e in self.effects]

    async def run(self, lo: int, hi: int) -> None:
        """Store timers ``lo`` to ``hi - 1`` (timed)."""
        raise NotImplementedError

    async def end_round(self) -> None:
        """Finish the round, e.g. commit (timed)."""

    async def release(self) -> None:
        """Give back what the round held (untimed)."""

    def job(self, i: int) -> Job:
        """The raw oban job equivalent to timer ``i``: same worker, args, meta, queue."""
        return Job(
            TIMER_WORKER,
            args=self.args[i],
            meta={META_DELIVERY: self.ctx.config.delivery},
            queue=QUEUE,
            scheduled_at=datetime.now(UTC) + ONE_HOUR,
        )


class OursSequential(InsertPath):
    """``await _timer.schedule(config, scope, effect)``, one pooled connection per call."""

    async def run(self, lo: int, hi: int) -> None:
        """Schedule one by one."""
        config, scope, effects = self.ctx.config, self.scope, self.effects
        for i in range(lo, hi):
            await _timer.schedule(config, scope, effects[i])


class RawSequential(InsertPath):
    """``await oban.enqueue(Job(...))``, one pooled connection per call."""

    role = "raw"

    async def run(self, lo: int, hi: int) -> None:
        """Enqueue one by one."""
        oban = self.ctx.oban
        for i in range(lo, hi):
            await oban.enqueue(self.job(i))


class InTransaction(InsertPath):
    """A path that holds one connection (one transaction) for the whole round."""

    conn: Any = None

    async def start_round(self, scope: str, n: int) -> None:
        """Build inputs and take a connection (the transaction starts with the first insert)."""
        await super().start_round(scope, n)
        self.conn = await self.ctx.pool.getconn()

    async def end_round(self) -> None:
        """Commit (timed)."""
        await self.conn.commit()

    async def release(self) -> None:
        """Return the connection."""
        if self.conn is not None:
            await self.ctx.pool.putconn(self.conn)
            self.conn = None


class OursTransaction(InTransaction):
    """``_timer.schedule(..., conn=conn)`` inside one caller transaction."""

    async def run(self, lo: int, hi: int) -> None:
        """Schedule one by one on the caller's connection."""
        config, scope, effects, conn = self.ctx.config, self.scope, self.effects, self.conn
        for i in range(lo, hi):
            await _timer.schedule(config, scope, effects[i], conn=conn)


class RawTransaction(InTransaction):
    """``oban.enqueue(job, conn=conn)`` inside one caller transaction."""

    role = "raw"

    async def run(self, lo: int, hi: int) -> None:
        """Enqueue one by one on the caller's connection."""
        oban, conn = self.ctx.oban, self.conn
        for i in range(lo, hi):
            await oban.enqueue(self.job(i), conn=conn)


class Batched(InsertPath):
    """A path storing ``batch`` timers per call, each call on its own pooled connection."""

    def __init__(self, label: str, ctx: InsertContext, batch: int) -> None:
        """Remember the batch size."""
        super().__init__(label, ctx)
        self.batch = batch


class OursMany(Batched):
    """``_timer.schedule_many(config, scope, effects[b:b+batch])``."""

    async def run(self, lo: int, hi: int) -> None:
        """One call per batch."""
        config, scope, effects = self.ctx.config, self.scope, self.effects
        for b in range(lo, hi, self.batch):
            await _timer.schedule_many(config, scope, effects[b : min(b + self.batch, hi)])


class RawMany(Batched):
    """``oban.enqueue_many([Job(...), ...])``."""

    role = "raw"

    async def run(self, lo: int, hi: int) -> None:
        """One call per batch."""
        oban = self.ctx.oban
        for b in range(lo, hi, self.batch):
            await oban.enqueue_many([self.job(i) for i in range(b, min(b + self.batch, hi))])


class RawMultiRow(Batched):
    """One hand-written multi-row ``INSERT ... SELECT FROM unnest`` per batch (context)."""

    role = "context"

    async def run(self, lo: int, hi: int) -> None:
        """One statement per batch."""
        meta = Jsonb({META_DELIVERY: self.ctx.config.delivery})
        for b in range(lo, hi, self.batch):
            chunk = [Jsonb(a) for a in self.args[b : min(b + self.batch, hi)]]
            async with self.ctx.pool.connection() as conn:
                cursor = await conn.execute(
                    RAW_MULTI_ROW_SQL,
                    {"args": chunk, "meta": meta, "queue": QUEUE, "worker": TIMER_WORKER},
                )
                await cursor.fetchall()


@dataclass
class InsertCase:
    """One comparison: our path, its raw peer, optional context paths."""

    key: str
    title: str
    paths: list[InsertPath]
    slice_size: int


async def count_scopes(pool: AsyncConnectionPool, scopes: list[str]) -> dict[str, int]:
    """Rows per scope in ``oban_jobs``."""
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT args->>'scope', count(*) FROM oban_jobs "
            "WHERE args->>'scope' = ANY(%s) GROUP BY 1",
            [scopes],
        )
        return {scope: int(count) for scope, count in await cursor.fetchall()}


async def insert_round(
    case: InsertCase,
    pool: AsyncConnectionPool,
    n: int,
    round_no: int,
    timed: bool,
    profilers: dict[InsertPath, cProfile.Profile] | None = None,
) -> None:
    """Run every path of ``case`` once over ``n`` timers, interleaved slice by slice.

    The path order rotates with ``round_no``. The table is emptied first; afterwards every
    path's scope must hold exactly ``n`` rows. With ``profilers``, each path's timed work
    runs under its own profiler.
    """
    async with pool.connection() as conn:
        await conn.execute("TRUNCATE oban_jobs")
    shift = round_no % len(case.paths)
    order = case.paths[shift:] + case.paths[:shift]
    tag = "t" if timed else "w"
    for path in order:
        await path.start_round(f"ins-{case.key}-{order.index(path)}-{tag}{round_no}", n)
    wall = dict.fromkeys(order, 0.0)
    cpu = dict.fromkeys(order, 0.0)
    gc.collect()
    try:
        for lo in range(0, n, case.slice_size):
            hi = min(lo + case.slice_size, n)
            for path in order:
                profiler = profilers[path] if profilers else None
                w0, c0 = time.perf_counter(), time.process_time()
                if profiler:
                    profiler.enable()
                await path.run(lo, hi)
                if profiler:
                    profiler.disable()
                wall[path] += time.perf_counter() - w0
                cpu[path] += time.process_time() - c0
        for path in order:
            w0, c0 = time.perf_counter(), time.process_time()
            await path.end_round()
            wall[path] += time.perf_counter() - w0
            cpu[path] += time.process_time() - c0
    finally:
        for path in order:
            await path.release()
    counts = await count_scopes(pool, [p.scope for p in order])
    for path in order:
        if counts.get(path.scope, 0) != n:
            raise VerificationError(
                f"{path.label}: {counts.get(path.scope, 0)} rows stored, expected {n}"
            )
    if timed:
        for path in order:
            path.runs.append(wall[path])
            path.cpu.append(cpu[path])


async def profile_inserts(
    cases: list[InsertCase], pool: AsyncConnectionPool, n: int, top: int
) -> None:
    """One untimed round per case with every path under cProfile; print each path's top."""
    print(f"\nProfile: one round of {n:,} inserts per path (client side; cProfile slows it)")
    for case in cases:
        profilers = {path: cProfile.Profile() for path in case.paths}
        await insert_round(case, pool, min(n, 100), 0, timed=False)
        await insert_round(case, pool, n, 0, timed=False, profilers=profilers)
        for path in case.paths:
            print(f"\n{case.title} -- {path.label}")
            stats = pstats.Stats(profilers[path], stream=sys.stdout)
            stats.sort_stats("tottime").print_stats(top)


def best_rate(path: InsertPath, n: int) -> float:
    """Inserts per second of the fastest round."""
    return n / min(path.runs)


async def bench_inserts(server: Server, args: argparse.Namespace) -> list[tuple[str, bool]]:
    """Section 1; returns the verdicts ``(name, met)``."""
    n = args.inserts
    url = await server.create_database("insert")
    pool = await open_pool(url, max_size=4)
    oban, config = make_client(pool, "insert")
    ctx = InsertContext(pool=pool, oban=oban, config=config)
    try:
        cases = [
            InsertCase(
                "a",
                "(a) sequential, one pooled connection (own commit) per call",
                [
                    OursSequential("ours: _timer.schedule(config, scope, effect)", ctx),
                    RawSequential("raw:  await oban.enqueue(Job(...))", ctx),
                ],
                args.slice,
            ),
            InsertCase(
                "b",
                "(b) sequential inside ONE caller transaction (conn=)",
                [
                    OursTransaction("ours: _timer.schedule(..., conn=conn)", ctx),
                    RawTransaction("raw:  oban.enqueue(Job(...), conn=conn)", ctx),
                ],
                args.slice,
            ),
        ]
        has_many = hasattr(_timer, "schedule_many")
        for batch in sorted({args.batch, n}):
            slice_size = n if batch >= n else max(batch, args.slice // batch * batch)
            label = f"{n:,} in one call" if batch >= n else f"batches of {batch}"
            paths: list[InsertPath] = []
            if has_many:
                paths.append(OursMany(f"ours: _timer.schedule_many(... {batch} ...)", ctx, batch))
            paths.append(RawMany(f"raw:  oban.enqueue_many({batch} jobs)", ctx, batch))
            paths.append(RawMultiRow(f"ctx:  raw multi-row INSERT ({batch} rows)", ctx, batch))
            cases.append(InsertCase(f"c{batch}", f"(c) batch: {label}", paths, slice_size))

        if args.profile:
            await profile_inserts(cases, pool, n, args.profile_top)
            return []
        print(
            f"\n1. Insert throughput: {n:,} timers per path and round, scheduled 1 h out; "
            f"best of {args.repeats} rounds"
        )
        print(
            "   paths of a case run interleaved (slices of "
            f"{args.slice} inserts), order rotated each round; one untimed warm-up round"
        )
        if not has_many:
            print("   note: _timer.schedule_many does not exist here; batch rows are raw only")
        for case in cases:
            await insert_round(case, pool, min(n, 100), 0, timed=False)
            for r in range(args.repeats):
                await insert_round(case, pool, n, r, timed=True)

        rows: list[list[str]] = []
        for case in cases:
            for i, path in enumerate(case.paths):
                best = min(path.runs)
                k = path.runs.index(best)
                rows.append(
                    [
                        case.title if i == 0 else "",
                        path.label,
                        f"{best_rate(path, n):,.0f}",
                        f"{best:.3f}",
                        f"{best / n * 1e6:,.0f}",
                        f"{path.cpu[k] / best:.0%}",
                        " ".join(f"{t:.2f}" for t in path.runs),
                    ]
                )
        print()
        print_table(
            ["case", "path", "inserts/s", "best (s)", "us/insert", "client cpu", "all runs (s)"],
            rows,
            left=2,
        )

        verdicts: list[tuple[str, bool]] = []
        ratio_rows: list[list[str]] = []
        for case in cases:
            ours = next((p for p in case.paths if p.role == "ours"), None)
            raw = next(p for p in case.paths if p.role == "raw")
            context = [p for p in case.paths if p.role == "context"]
            if ours is None:
                ratio_rows.append([case.title, "n/a", "", "no _timer.schedule_many"])
                continue
            ratio = best_rate(ours, n) / best_rate(raw, n)
            met = ratio >= INSERT_TARGET
            verdicts.append((f"insert {case.title}", met))
            note = "; ".join(
                f"ours/multi-row INSERT {best_rate(ours, n) / best_rate(c, n):.2f}" for c in context
            )
            ratio_rows.append([case.title, f"{ratio:.2f}", verdict(met), note])
        print(f"\n   ours/raw inserts per second (target >= {INSERT_TARGET:.2f}):")
        print_table(["case", "ours/raw", "verdict", "context (not a target)"], ratio_rows)
        return verdicts
    finally:
        forget_oban(oban)
        await pool.close()
        server.drop_database(url)


# --------------------------------------------------------------------------- 2. cancel


async def load_timers(url: str, rows: int) -> dict[str, float]:
    """Fill ``oban_jobs`` with ``rows`` pending timer rows; return seconds per step.

    One ``INSERT ... SELECT generate_series`` with the secondary indexes dropped, then
    the indexes rebuilt (same definitions) and ``ANALYZE``.
    """
    sample = _timer_args.encode("bench-0", make_effect(1, HOUR_MS), None)
    started = time.perf_counter()
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' "
            "AND tablename = 'oban_jobs' AND indexname NOT LIKE '%%pkey'"
        )
        indexes = await cursor.fetchall()
        for name, _ in indexes:
            await conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(name)))
        await conn.execute(
            LOAD_SQL,
            {
                "template": Jsonb(sample),
                "meta": Jsonb({META_DELIVERY: DELIVERY_PATH}),
                "queue": QUEUE,
                "worker": TIMER_WORKER,
                "per_scope": SCOPE_SIZE,
                "rows": rows,
            },
        )
        inserted = time.perf_counter()
        await conn.execute("SET maintenance_work_mem = '256MB'")
        for _, definition in indexes:
            await conn.execute(definition)
        indexed = time.perf_counter()
        await conn.execute("ANALYZE oban_jobs")
        analyzed = time.perf_counter()
        cursor = await conn.execute(
            "SELECT count(*) FROM oban_jobs WHERE worker = %s AND state = 'scheduled'",
            [TIMER_WORKER],
        )
        row = await cursor.fetchone()
    if row is None or row[0] != rows:
        raise VerificationError(f"loaded {row} pending timers, expected {rows}")
    return {
        "total": analyzed - started,
        "insert": inserted - started,
        "indexes": indexed - inserted,
        "analyze": analyzed - indexed,
    }


def row_key(i: int) -> tuple[str, str]:
    """``(scope, send_id)`` of loaded row ``i`` (see ``LOAD_SQL``)."""
    return f"bench-{i // SCOPE_SIZE}", f"t-{i % SCOPE_SIZE}"


async def explain_cancel(url: str, oban: Oban, i: int) -> list[str]:
    """``EXPLAIN (ANALYZE, BUFFERS)`` of our cancel statement for row ``i``, rolled back."""
    scope, send_id = row_key(i)
    params = {"scope": scope, "value": send_id, "reason": "explain"}
    text = _store.statement(oban, "cancel_jobs", worker=TIMER_WORKER, key="send_id")
    statement = "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + text
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cursor = psycopg.AsyncClientCursor(conn)
        await cursor.execute(statement, params)
        plan = [str(r[0]) for r in await cursor.fetchall()]
        await conn.rollback()
    return plan


@dataclass
class CancelSide:
    """One table size: its database, client and measured latencies (ms)."""

    rows: int
    url: str
    pool: AsyncConnectionPool
    oban: Oban
    config: Config
    load_s: dict[str, float]
    latencies: list[float] = field(default_factory=list)


async def bench_cancel(server: Server, args: argparse.Namespace) -> list[tuple[str, bool]]:
    """Section 2; returns the verdicts."""
    sizes = (args.cancel_small, args.cancel_rows)
    print(
        f"\n2. Cancel latency: _timer.cancel_timers matching one pending timer (random scope), "
        f"{args.cancels} cancels per table size, interleaved; own pooled connection per call"
    )
    sides: list[CancelSide] = []
    try:
        for rows in sizes:
            url = await server.create_database(f"cancel{rows}")
            load_s = await load_timers(url, rows)
            pool = await open_pool(url, max_size=2)
            oban, config = make_client(pool, f"cancel{rows}")
            sides.append(CancelSide(rows, url, pool, oban, config, load_s))
            print(
                f"   loaded {rows:>10,} pending timers in {load_s['total']:5.1f} s: one INSERT ... "
                f"SELECT generate_series {load_s['insert']:.1f} s (secondary indexes dropped), "
                f"indexes rebuilt {load_s['indexes']:.1f} s, ANALYZE {load_s['analyze']:.1f} s"
            )
        rng = random.Random(20261129)  # noqa: S311 - a seeded sample of rows, not a secret
        warmup = 20
        picks = {
            side.rows: rng.sample(range(side.rows), args.cancels + warmup + 1) for side in sides
        }
        for k in range(args.cancels + warmup):
            order = sides if k % 2 == 0 else sides[::-1]
            for side in order:
                scope, send_id = row_key(picks[side.rows][k])
                start = time.perf_counter()
                count = await _timer.cancel_timers(side.config, scope, make_cancel(send_id, k + 1))
                elapsed = (time.perf_counter() - start) * 1000
                if count != 1:
                    raise VerificationError(f"cancel {scope}/{send_id} matched {count} jobs")
                if k >= warmup:
                    side.latencies.append(elapsed)
        small, big = sides
        table: list[list[str]] = []
        for side in sides:
            lat = side.latencies
            table.append(
                [
                    f"{side.rows:,} pending",
                    f"{percentile(lat, 50):.3f}",
                    f"{percentile(lat, 95):.3f}",
                    f"{sum(lat) / len(lat):.3f}",
                    f"{min(lat):.3f}",
                    f"{max(lat):.3f}",
                ]
            )
        print()
        print_table(["table", "median ms", "p95 ms", "mean ms", "min ms", "max ms"], table)
        verdicts: list[tuple[str, bool]] = []
        print(f"\n   {big.rows:,}/{small.rows:,} latency ratio (target <= {CANCEL_TARGET:.1f}):")
        ratio_rows = []
        for name, q in (("median", 50), ("p95", 95)):
            ratio = percentile(big.latencies, q) / percentile(small.latencies, q)
            met = ratio <= CANCEL_TARGET
            verdicts.append((f"cancel {name} {big.rows:,}/{small.rows:,}", met))
            ratio_rows.append([name, f"{ratio:.2f}", verdict(met)])
        print_table(["statistic", "ratio", "verdict"], ratio_rows)
        plan = await explain_cancel(big.url, big.oban, picks[big.rows][-1])
        uses_index = any(TIMER_PENDING_INDEX in line for line in plan)
        print(
            f"\n   EXPLAIN (ANALYZE, BUFFERS) of the cancel statement on {big.rows:,} rows "
            f"(rolled back); uses {TIMER_PENDING_INDEX}: {'yes' if uses_index else 'NO'}"
        )
        for line in plan:
            print(f"     {line}")
        return verdicts
    finally:
        for side in sides:
            forget_oban(side.oban)
            await side.pool.close()
            server.drop_database(side.url)


# --------------------------------------------------------------------------- 3. firing


@dataclass
class Workload:
    """Timers to fire: delays (ms from the scheduling transaction's start)."""

    name: str
    description: str
    delays_ms: list[int]
    targeted: bool
    """Whether the p99 lateness target applies (a burst measures capacity only)."""


@dataclass
class FireResult:
    """Lateness (ms), its two parts, and delivery counts of one workload and configuration.

    ``pickup`` is ``attempted_at - scheduled_at`` (staging, waiting for a free slot, the
    fetch); ``run`` is ``fired_at - attempted_at`` (dispatch, decode, the delivery).
    """

    expected: int
    lateness: list[float]
    pickup: list[float]
    run: list[float]
    per_node: dict[str, int]
    window_s: float
    schedule_s: float
    """How long the scheduling transaction took (it should end before the first timer)."""

    @property
    def delivered(self) -> int:
        """Fire records (more than ``expected`` means duplicates)."""
        return len(self.lateness)

    def rate_per_process(self) -> float:
        """Deliveries per second per process over the window (first due to last fire)."""
        if not self.per_node or self.window_s <= 0:
            return 0.0
        return sum(self.per_node.values()) / len(self.per_node) / self.window_s


STAGERS = ("prompt", "stock")
"""Worker configurations: ours (default configuration) and oban's stock stager (the peer)."""


@dataclass
class FireSide:
    """The database (and client) one stager configuration's workers run on."""

    url: str
    pool: AsyncConnectionPool
    oban: Oban
    config: Config


class WorkerGroup:
    """Worker processes running ``bench/timers_worker.py``; started and stopped together."""

    def __init__(
        self, url: str, count: int, stager: str, limit: int, recorders: int, log_dir: Path
    ) -> None:
        """Describe the group; :meth:`start` launches it."""
        self.url = url
        self.count = count
        self.stager = stager
        self.limit = limit
        self.recorders = recorders
        self.log_dir = log_dir
        self.procs: list[asyncio.subprocess.Process] = []
        self.logs: list[Path] = []
        self.ready: list[str] = []
        self.nodes = [f"{stager}-w{i + 1}" for i in range(count)]

    async def start(self) -> None:
        """Launch the processes and wait for each one's ``ready`` line."""
        for node in self.nodes:
            log = self.log_dir / f"{node}-{uuid.uuid4().hex[:6]}.log"
            self.logs.append(log)
            with log.open("wb") as err:
                proc = await asyncio.create_subprocess_exec(
                    sys.executable,
                    str(WORKER_SCRIPT),
                    "--url",
                    self.url,
                    "--node",
                    node,
                    "--stager",
                    self.stager,
                    "--limit",
                    str(self.limit),
                    "--recorders",
                    str(self.recorders),
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=err,
                )
            self.procs.append(proc)
        for proc, log in zip(self.procs, self.logs, strict=True):
            assert proc.stdout is not None  # noqa: S101 - started with stdout=PIPE
            try:
                line = await asyncio.wait_for(proc.stdout.readline(), timeout=60)
            except TimeoutError:
                line = b""
            text = line.decode().strip()
            if not text.startswith("ready"):
                raise RuntimeError(
                    f"worker {proc.pid} did not start ({text!r}); its stderr:\n"
                    + log.read_text(errors="replace")[-3000:]
                )
            self.ready.append(text)
        expected = "PromptStager" if self.stager == "prompt" else "Stager"
        for text in self.ready:
            if text.split()[1] != expected:
                raise VerificationError(f"worker built {text!r}, expected a {expected}")

    async def stop(self) -> None:
        """Close every worker's stdin, wait for it to stop; kill ours if it hangs."""
        for proc in self.procs:
            if proc.stdin is not None and not proc.stdin.is_closing():
                proc.stdin.close()
        for proc in self.procs:
            try:
                await asyncio.wait_for(proc.wait(), timeout=30)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        failed = [
            (proc, log)
            for proc, log in zip(self.procs, self.logs, strict=True)
            if proc.returncode not in (0, None)
        ]
        for proc, log in failed:
            print(
                f"warning: worker {proc.pid} exited with {proc.returncode}; stderr tail:\n"
                + log.read_text(errors="replace")[-2000:],
                file=sys.stderr,
            )
        self.procs = []


async def run_workload(
    pool: AsyncConnectionPool, config: Config, workload: Workload, tag: str, nodes: list[str]
) -> FireResult:
    """Schedule the workload in one transaction, wait for it to fire, read the lateness."""
    prefix = f"fire-{tag}-{workload.name}-"
    per_scope = 100
    started = time.perf_counter()
    async with pool.connection() as conn:
        for start in range(0, len(workload.delays_ms), per_scope):
            chunk = workload.delays_ms[start : start + per_scope]
            effects = [make_effect(start + j + 1, d) for j, d in enumerate(chunk)]
            scope = f"{prefix}{start // per_scope}"
            if hasattr(_timer, "schedule_many"):
                await _timer.schedule_many(config, scope, effects, conn=conn)
            else:
                for effect in effects:
                    await _timer.schedule(config, scope, effect, conn=conn)
    schedule_s = time.perf_counter() - started
    expected = len(workload.delays_ms)
    deadline = time.monotonic() + max(workload.delays_ms) / 1000 + 30 + expected / 50
    pattern = prefix.replace("_", r"\_") + "%"
    while time.monotonic() < deadline:
        async with pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT count(*) FROM bench_fires WHERE scope LIKE %s", [pattern]
            )
            row = await cursor.fetchone()
        if row is not None and row[0] >= expected:
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.2)  # late duplicates, if any
    async with pool.connection() as conn:
        cursor = await conn.execute(LATENESS_SQL, {"worker": TIMER_WORKER, "pattern": pattern})
        rows = await cursor.fetchall()
    per_node = dict.fromkeys(nodes, 0)
    for row in rows:
        per_node[row[0]] = per_node.get(row[0], 0) + 1
    window = 0.0
    if rows:
        window = max(float(r[4]) for r in rows) - min(float(r[5]) for r in rows)
    return FireResult(
        expected,
        lateness=[float(r[1]) for r in rows],
        pickup=[float(r[2]) for r in rows],
        run=[float(r[3]) for r in rows],
        per_node=per_node,
        window_s=window,
        schedule_s=schedule_s,
    )


async def bench_firing(  # noqa: C901 - one linear script: set up, rounds, verdicts
    server: Server, args: argparse.Namespace
) -> list[tuple[str, bool]]:
    """Section 3; returns the verdicts."""
    lead = args.fire_lead_ms
    n = args.fire_timers
    window_ms = int(args.fire_window * 1000)
    paced = max(1, round(args.paced_rate * args.paced_seconds))
    workloads = [
        Workload(
            "stream",
            f"{n:,} timers due evenly over {args.fire_window:g} s "
            f"(offered {n / args.fire_window:,.0f}/s)",
            [lead + i * window_ms // n for i in range(n)],
            targeted=True,
        ),
        Workload(
            "paced",
            f"{paced:,} timers due evenly at {args.paced_rate:g}/s (under capacity)",
            [lead + round(i * 1000 / args.paced_rate) for i in range(paced)],
            targeted=True,
        ),
        Workload(
            "sparse",
            f"{args.sparse} timers due {args.sparse_gap_ms} ms apart",
            [lead + i * args.sparse_gap_ms for i in range(args.sparse)],
            targeted=True,
        ),
        Workload(
            "burst",
            f"{n:,} timers due at the same instant (capacity; no lateness target)",
            [lead] * n,
            targeted=False,
        ),
    ]
    configs = [(procs, stager) for procs in args.processes for stager in STAGERS]
    print(
        f"\n3. Firing: worker processes each running Oban with queues={{'timers': {args.limit}}},"
        " delivery = one INSERT recording clock_timestamp()"
    )
    print(
        "   ours = default configuration (statifier_oban imported, no stager options: "
        "PromptStager, 0.1 s); stock = oban's Stager (1 s)"
    )
    print(
        "   lateness = recorded fire time - scheduled_at (both database clock); "
        f"timers scheduled {lead} ms ahead in one transaction"
    )
    for w in workloads:
        print(f"   {w.name}: {w.description}")
    sides: dict[str, FireSide] = {}
    log_dir = Path(tempfile.mkdtemp(prefix="statifier-bench-workers-"))
    results: dict[tuple[int, str, str], FireResult] = {}
    try:
        for stager in STAGERS:
            url = await server.create_database(f"fire_{stager}")
            pool = await open_pool(url, max_size=2)
            oban, config = make_client(pool, f"fire_{stager}")
            sides[stager] = FireSide(url, pool, oban, config)
            async with pool.connection() as conn:
                await conn.execute(FIRES_DDL)
        for procs in args.processes:
            groups = {
                stager: WorkerGroup(
                    side.url, procs, stager, args.limit, args.recorder_connections, log_dir
                )
                for stager, side in sides.items()
            }
            try:
                for stager, side in sides.items():
                    async with side.pool.connection() as conn:
                        await conn.execute(
                            "TRUNCATE oban_jobs, bench_fires, oban_producers, oban_leaders"
                        )
                    await groups[stager].start()
                await asyncio.sleep(0.5)
                for k, w in enumerate(workloads):
                    order = STAGERS if k % 2 == 0 else STAGERS[::-1]
                    for stager in order:
                        side = sides[stager]
                        results[(procs, stager, w.name)] = await run_workload(
                            side.pool, side.config, w, f"{procs}{stager}", groups[stager].nodes
                        )
            finally:
                for group in groups.values():
                    await group.stop()
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)
        for side in sides.values():
            forget_oban(side.oban)
            await side.pool.close()
            server.drop_database(side.url)

    def pair(values: list[float]) -> str:
        return f"{percentile(values, 50):,.0f} / {percentile(values, 99):,.0f}"

    table: list[list[str]] = []
    for procs, stager in configs:
        for w in workloads:
            r = results[(procs, stager, w.name)]
            lat = r.lateness
            table.append(
                [
                    f"{procs} proc" + ("s" if procs > 1 else ""),
                    "ours" if stager == "prompt" else "stock",
                    w.name,
                    f"{r.delivered}/{r.expected}",
                    f"{percentile(lat, 50):,.0f}",
                    f"{percentile(lat, 95):,.0f}",
                    f"{percentile(lat, 99):,.0f}",
                    f"{max(lat) if lat else float('nan'):,.0f}",
                    pair(r.pickup),
                    pair(r.run),
                    f"{r.rate_per_process():,.0f}",
                    "/".join(str(r.per_node[k]) for k in sorted(r.per_node)),
                ]
            )
    print()
    print_table(
        [
            "workers",
            "stager",
            "workload",
            "delivered",
            "p50 ms",
            "p95 ms",
            "p99 ms",
            "max ms",
            "pickup p50/p99",
            "run p50/p99",
            "per proc/s",
            "per node",
        ],
        table,
        left=3,
    )
    for (procs, stager, name), r in results.items():
        if r.schedule_s * 1000 > lead:
            print(
                f"   note: {procs} proc {stager} {name}: scheduling took {r.schedule_s:.2f} s, "
                f"longer than the {lead} ms lead (early timers were late before they existed)"
            )
    print(
        "\n   ours vs stock, same workload and process count (lateness ratios: ours/stock, "
        "lower is better; rate: ours/stock)"
    )
    print(
        f"   target: ours p99 < {LATENESS_TARGET_MS:.0f} ms with the default configuration "
        "(stream, paced and sparse)"
    )
    verdicts: list[tuple[str, bool]] = []
    ratio_rows: list[list[str]] = []
    for procs in args.processes:
        for w in workloads:
            ours = results[(procs, "prompt", w.name)]
            stock = results[(procs, "stock", w.name)]
            p99 = percentile(ours.lateness, 99)
            complete = ours.delivered == ours.expected
            status = "n/a (capacity)"
            if w.targeted:
                met = complete and p99 < LATENESS_TARGET_MS
                verdicts.append(
                    (f"firing p99 < {LATENESS_TARGET_MS:.0f} ms, {procs} proc, {w.name}", met)
                )
                status = verdict(met) + ("" if complete else " (delivered != expected)")
            stock_rate = stock.rate_per_process()
            ratio_rows.append(
                [
                    f"{procs} proc" + ("s" if procs > 1 else ""),
                    w.name,
                    f"{percentile(ours.lateness, 50) / percentile(stock.lateness, 50):.3f}",
                    f"{p99 / percentile(stock.lateness, 99):.3f}",
                    f"{ours.rate_per_process() / stock_rate:.2f}" if stock_rate else "n/a",
                    f"{p99:,.0f}",
                    status,
                ]
            )
    print_table(
        ["workers", "workload", "p50 ratio", "p99 ratio", "rate ratio", "ours p99 ms", "verdict"],
        ratio_rows,
        left=2,
    )
    return verdicts


# --------------------------------------------------------------------------- main


def package_version(name: str) -> str:
    """Installed version of a distribution, or ``?``."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def load_average() -> str:
    """The 1/5/15-minute load averages (other processes share these CPUs)."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def print_header(server: Server) -> None:
    """Versions and server settings that shape the figures."""
    with psycopg.connect(server.url, autocommit=True) as conn:
        settings = {
            name: str(conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone())
            for name in ("server_version", "fsync", "synchronous_commit")
        }
    clean = {k: v.strip("(),'") for k, v in settings.items()}
    where = "embedded (own data dir)" if server.embedded else "--database-url"
    print(
        f"statifier_oban timers benchmark: Python {platform.python_version()}, "
        f"oban {package_version('oban')}, psycopg {package_version('psycopg')}, "
        f"{os.cpu_count()} CPUs"
    )
    print(
        f"PostgreSQL {clean['server_version']} ({where}), fsync={clean['fsync']}, "
        f"synchronous_commit={clean['synchronous_commit']}; load average at start "
        f"{load_average()}"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line; ``--quick`` shrinks every size for a smoke run."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", help="server to use (creates and drops databases)")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument(
        "--only",
        default="insert,cancel,fire",
        help="comma-separated sections to run (insert, cancel, fire)",
    )
    parser.add_argument("--inserts", type=int, help="timers per insert path and round [2000]")
    parser.add_argument("--repeats", type=int, help="timed rounds per insert case [3]")
    parser.add_argument("--slice", type=int, default=200, help="inserts per interleaved slice")
    parser.add_argument("--batch", type=int, default=10, help="small batch size for (c) [10]")
    parser.add_argument("--cancel-rows", type=int, help="big table size [1000000]")
    parser.add_argument("--cancel-small", type=int, default=1000, help="small table size")
    parser.add_argument("--cancels", type=int, help="timed cancels per table size [200]")
    parser.add_argument("--fire-timers", type=int, help="timers of stream and burst [2000]")
    parser.add_argument("--fire-window", type=float, help="stream spread in seconds [2]")
    parser.add_argument("--fire-lead-ms", type=int, default=2000, help="scheduling lead [2000]")
    parser.add_argument("--paced-rate", type=float, default=100, help="paced timers/s [100]")
    parser.add_argument("--paced-seconds", type=float, help="paced duration [5]")
    parser.add_argument("--sparse", type=int, help="sparse timers [50]")
    parser.add_argument("--sparse-gap-ms", type=int, default=150, help="sparse spacing")
    parser.add_argument("--limit", type=int, default=20, help="timers queue limit per worker")
    parser.add_argument(
        "--recorder-connections",
        type=int,
        default=10,
        help="connections each worker's recording delivery uses [10]",
    )
    parser.add_argument("--processes", default="1,2", help="worker process counts [1,2]")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="profile the insert paths (one round each, client side) instead of timing",
    )
    parser.add_argument("--profile-top", type=int, default=15, help="functions per profile")
    args = parser.parse_args(argv)
    full = {
        "inserts": 2000,
        "repeats": 3,
        "cancel_rows": 1_000_000,
        "cancels": 200,
        "fire_timers": 2000,
        "fire_window": 2.0,
        "paced_seconds": 5.0,
        "sparse": 50,
    }
    quick = {
        "inserts": 200,
        "repeats": 2,
        "cancel_rows": 20_000,
        "cancels": 40,
        "fire_timers": 200,
        "fire_window": 1.0,
        "paced_seconds": 1.0,
        "sparse": 10,
    }
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.quick:
        args.slice = min(args.slice, 50)
    args.only = {s.strip() for s in args.only.split(",") if s.strip()}
    if args.profile:
        args.only = {"insert"}
    args.processes = [int(p) for p in args.processes.split(",") if p.strip()]
    return args


async def run(args: argparse.Namespace) -> int:
    """Run the selected sections against a fresh or given server."""
    embedded = None if args.database_url else EmbeddedPostgres.start()
    url = args.database_url if embedded is None else embedded.url
    server = Server(url=url, embedded=embedded)
    started = time.perf_counter()
    try:
        print_header(server)
        verdicts: list[tuple[str, bool]] = []
        if "insert" in args.only:
            verdicts += await bench_inserts(server, args)
        if "cancel" in args.only:
            verdicts += await bench_cancel(server, args)
        if "fire" in args.only:
            verdicts += await bench_firing(server, args)
        print("\nTargets:")
        for name, met in verdicts:
            print(f"  {verdict(met):5}  {name}")
        print(
            f"\nTotal time {time.perf_counter() - started:.0f} s; "
            f"load average at end {load_average()}"
        )
        return 0
    finally:
        server.drop_all()
        if embedded is not None:
            embedded.stop()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; exit status 1 on a crash or a failed verification, never on a target."""
    args = parse_args(argv)
    if not statifier_oban.latency.installed():  # importing the package installs it
        raise RuntimeError("statifier_oban did not install prompt staging")
    try:
        return asyncio.run(run(args))
    except VerificationError as exc:
        print(f"\nVERIFICATION FAILED: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
