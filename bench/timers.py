"""Timer benchmark: statifier_oban's durable timers against raw oban, in one run.

Run from the repository root::

    uv run python bench/timers.py [--quick] [--database-url CONNINFO]

Three measurements, each reported as a ratio against a peer measured in the same run
(see ``bench/README.md`` for the procedure and what every column means):

1. Insert throughput: ``_schedule.schedule`` / ``_schedule.schedule_many`` against an equivalent
   raw ``oban.enqueue`` / ``enqueue_many`` (same worker name, args and meta, scheduled
   1 h out), sequentially on pooled connections, inside one caller transaction, and in
   batches, and ``schedule_many`` against one hand-written ``INSERT ... ON CONFLICT``
   (goal: at least 0.8 of its rate for 2,000 timers in one call). Paths are interleaved
   slice by slice; the best of ``--repeats`` rounds counts.
2. Cancel latency: ``_schedule.cancel_timers`` matching one job, with 1,000 and with 1,000,000
   pending timers in the table (two databases, cancels interleaved), plus ``EXPLAIN``.
3. Firing: 1 and 2 worker processes (``bench/timers_worker.py``) per configuration: ours
   (the default: prompt stager, batched acks, one-statement fetch), today (main before
   issue 12, frozen in ``bench/timers_today.py``) and stock (oban alone), all running at
   once on databases of their own; the workloads (stream, paced, sparse, and rounds of a
   burst) run on every group in turn. Lateness, fired timers/s from the first fire to the
   last, and CPU per fired timer (worker processes and their server backends). Goals:
   ours/today >= 2 and 2 workers/1 >= 1.7 in fired timers/s (medians of per-round ratios),
   p99 lateness < 250 ms.

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
from statifier_oban import Config
from statifier_oban._names import META_DELIVERY, TIMER_WORKER
from statifier_oban.embedded import EmbeddedPostgres
from statifier_oban.schema import TIMER_PENDING_INDEX, install
from statifier_oban.store import _statements
from statifier_oban.timers import _args, _schedule

QUEUE = "timers"
"""The timers queue of every benchmark ``Config`` and worker."""

HOUR_MS = 3_600_000
ONE_HOUR = timedelta(hours=1)

INSERT_TARGET = 0.8
"""Ours/raw inserts per second must be at least this (our layer costs at most 25%)."""

BATCH_TARGET = 0.8
"""``schedule_many`` of a whole batch over one multi-row ``INSERT ... ON CONFLICT`` must be
at least this."""

CANCEL_TARGET = 3.0
"""Cancel latency with the big table over the small one must be at most this."""

LATENESS_TARGET_MS = 250.0
"""p99 firing lateness with the default configuration must be below this."""

WORKER_SCRIPT = Path(__file__).with_name("timers_worker.py")
DELIVERY_PATH = "timers_worker:RecordFire"
"""The recording delivery, resolved inside the worker processes."""

SCOPE_SIZE = 10
"""Timers per scope in the cancel tables (send ids ``t-0`` .. ``t-9``)."""

RAW_MULTI_ROW_SQL = f"""
INSERT INTO oban_jobs (args, meta, queue, worker, state, scheduled_at)
SELECT a, %(meta)s, %(queue)s, '{TIMER_WORKER}', 'scheduled',
       timezone('UTC', now()) + interval '1 hour'
FROM jsonb_array_elements(%(args)s::jsonb) AS a
ON CONFLICT ((args->>'scope'), (args->>'ordinal')) WHERE worker = '{TIMER_WORKER}' DO NOTHING
RETURNING id
"""  # noqa: S608 - the worker name is our constant, no input
"""The peer of a batch: one multi-row ``INSERT ... ON CONFLICT DO NOTHING`` with the same
dedup as ours (the worker name is a literal, as in our statements, so that PostgreSQL
infers the partial unique index as the arbiter)."""

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
        self.args = [_args.encode(scope, e, None) for e in self.effects]

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
    """``await _schedule.schedule(config, scope, effect)``, one pooled connection per call."""

    async def run(self, lo: int, hi: int) -> None:
        """Schedule one by one."""
        config, scope, effects = self.ctx.config, self.scope, self.effects
        for i in range(lo, hi):
            await _schedule.schedule(config, scope, effects[i])


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
    """``_schedule.schedule(..., conn=conn)`` inside one caller transaction."""

    async def run(self, lo: int, hi: int) -> None:
        """Schedule one by one on the caller's connection."""
        config, scope, effects, conn = self.ctx.config, self.scope, self.effects, self.conn
        for i in range(lo, hi):
            await _schedule.schedule(config, scope, effects[i], conn=conn)


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
    """``_schedule.schedule_many(config, scope, effects[b:b+batch])``."""

    async def run(self, lo: int, hi: int) -> None:
        """One call per batch."""
        config, scope, effects = self.ctx.config, self.scope, self.effects
        for b in range(lo, hi, self.batch):
            await _schedule.schedule_many(config, scope, effects[b : min(b + self.batch, hi)])


class RawMany(Batched):
    """``oban.enqueue_many([Job(...), ...])``."""

    role = "raw"

    async def run(self, lo: int, hi: int) -> None:
        """One call per batch."""
        oban = self.ctx.oban
        for b in range(lo, hi, self.batch):
            await oban.enqueue_many([self.job(i) for i in range(b, min(b + self.batch, hi))])


class RawMultiRow(Batched):
    """One hand-written multi-row ``INSERT ... ON CONFLICT`` per batch (the batch's peer)."""

    role = "context"

    async def run(self, lo: int, hi: int) -> None:
        """One statement per batch."""
        meta = Jsonb({META_DELIVERY: self.ctx.config.delivery})
        for b in range(lo, hi, self.batch):
            chunk = Jsonb(self.args[b : min(b + self.batch, hi)])
            async with self.ctx.pool.connection() as conn:
                cursor = await conn.execute(
                    RAW_MULTI_ROW_SQL, {"args": chunk, "meta": meta, "queue": QUEUE}
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


def insert_verdicts(cases: list[InsertCase], n: int) -> list[tuple[str, bool]]:
    """Print ours/raw per case and ours/one INSERT per batch case; return the verdicts."""
    verdicts: list[tuple[str, bool]] = []
    ratio_rows: list[list[str]] = []
    for case in cases:
        ours = next((p for p in case.paths if p.role == "ours"), None)
        raw = next(p for p in case.paths if p.role == "raw")
        peer = next((p for p in case.paths if p.role == "context"), None)
        if ours is None:
            ratio_rows.append([case.title, "n/a", "", "", ""])
            continue
        ratio = best_rate(ours, n) / best_rate(raw, n)
        met = ratio >= INSERT_TARGET
        verdicts.append((f"insert {case.title}: ours/raw {ratio:.2f} >= {INSERT_TARGET}", met))
        batch_cells = ["", ""]
        if peer is not None:
            batch = best_rate(ours, n) / best_rate(peer, n)
            batch_cells = [f"{batch:.2f}", "-"]
            if case.slice_size >= n:  # the whole batch in one call: the target
                batch_met = batch >= BATCH_TARGET
                batch_cells[1] = verdict(batch_met)
                verdicts.append(
                    (
                        f"insert {case.title}: ours/one INSERT ... ON CONFLICT "
                        f"{batch:.2f} >= {BATCH_TARGET}",
                        batch_met,
                    )
                )
        ratio_rows.append([case.title, f"{ratio:.2f}", verdict(met), *batch_cells])
    print(
        f"\n   ours/raw inserts per second (target >= {INSERT_TARGET:.2f}); ours/one "
        f"INSERT ... ON CONFLICT (target >= {BATCH_TARGET:.2f} for {n:,} in one call):"
    )
    print_table(["case", "ours/raw", "verdict", "ours/one INSERT", "verdict"], ratio_rows)
    return verdicts


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
                    OursSequential("ours: _schedule.schedule(config, scope, effect)", ctx),
                    RawSequential("raw:  await oban.enqueue(Job(...))", ctx),
                ],
                args.slice,
            ),
            InsertCase(
                "b",
                "(b) sequential inside ONE caller transaction (conn=)",
                [
                    OursTransaction("ours: _schedule.schedule(..., conn=conn)", ctx),
                    RawTransaction("raw:  oban.enqueue(Job(...), conn=conn)", ctx),
                ],
                args.slice,
            ),
        ]
        has_many = hasattr(_schedule, "schedule_many")
        for batch in sorted({args.batch, n}):
            slice_size = n if batch >= n else max(batch, args.slice // batch * batch)
            label = f"{n:,} in one call" if batch >= n else f"batches of {batch}"
            paths: list[InsertPath] = []
            if has_many:
                paths.append(
                    OursMany(f"ours: _schedule.schedule_many(... {batch} ...)", ctx, batch)
                )
            paths.append(RawMany(f"raw:  oban.enqueue_many({batch} jobs)", ctx, batch))
            paths.append(
                RawMultiRow(f"ctx:  one INSERT ... ON CONFLICT ({batch} rows)", ctx, batch)
            )
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
            print("   note: _schedule.schedule_many does not exist here; batch rows are raw only")
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

        return insert_verdicts(cases, n)
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
    sample = _args.encode("bench-0", make_effect(1, HOUR_MS), None)
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
    text = _statements.statement(oban, "cancel_jobs", worker=TIMER_WORKER, key="send_id")
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
        f"\n2. Cancel latency: _schedule.cancel_timers matching one pending timer (random scope), "
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
                count = await _schedule.cancel_timers(
                    side.config, scope, make_cancel(send_id, k + 1)
                )
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
    """Whether the p99 lateness target applies (a burst measures capacity instead)."""


def proc_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (None if it cannot be read)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_of(pids: Sequence[int]) -> dict[int, float]:
    """CPU seconds per readable pid."""
    found = {pid: proc_cpu_seconds(pid) for pid in pids}
    return {pid: cpu for pid, cpu in found.items() if cpu is not None}


def cpu_spent(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds spent between two samples (a process that appeared counts from 0)."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


@dataclass
class FireResult:
    """Lateness (ms), its two parts, delivery counts and CPU of one workload run.

    ``pickup`` is ``attempted_at - scheduled_at`` (staging, waiting for a free slot, the
    fetch); ``run`` is ``fired_at - attempted_at`` (dispatch, decode, the delivery).
    """

    expected: int
    lateness: list[float]
    pickup: list[float]
    run: list[float]
    per_node: dict[str, int]
    first_fire: float
    last_fire: float
    first_due: float
    schedule_s: float
    """How long the scheduling transaction took (it should end before the first timer)."""
    worker_cpu_s: float | None
    db_cpu_s: float | None

    @property
    def delivered(self) -> int:
        """Fire records (more than ``expected`` means duplicates)."""
        return len(self.lateness)

    def rate(self) -> float:
        """Fired timers per second, all processes, from the first fire to the last."""
        window = self.last_fire - self.first_fire
        return self.delivered / window if window > 0 else 0.0

    def cpu_ms(self, seconds: float | None) -> str:
        """CPU milliseconds per fired timer, or n/a."""
        if seconds is None or not self.delivered:
            return "n/a"
        return f"{seconds * 1000 / self.delivered:.3f}"


MODES = ("ours", "today", "stock")
"""Worker configurations: ours (default configuration), today (main before issue 12, frozen
in ``bench/timers_today.py``) and stock (oban alone)."""

EXPECTED_STAGER = {"ours": "PromptStager", "today": "TodayStager", "stock": "Stager"}

WORKER_APP = "statifier-bench-worker"
"""``application_name`` of the worker processes' connections (their backends' CPU counts)."""

RATE_TARGET = 2.0
"""Fired timers/s on one worker (burst): ours over today must be at least this."""

SCALE_TARGET = 1.7
"""Fired timers/s (burst): 2 worker processes over 1 must be at least this."""


@dataclass
class FireSide:
    """The database (and client) one worker configuration runs on."""

    url: str
    pool: AsyncConnectionPool
    oban: Oban
    config: Config


class WorkerGroup:
    """Worker processes running ``bench/timers_worker.py``; started and stopped together."""

    def __init__(
        self,
        url: str,
        count: int,
        mode: str,
        args: argparse.Namespace,
        log_dir: Path,
    ) -> None:
        """Describe the group; :meth:`start` launches it."""
        self.url = make_conninfo(url, application_name=WORKER_APP)
        self.count = count
        self.mode = mode
        self.args = args
        self.log_dir = log_dir
        self.procs: list[asyncio.subprocess.Process] = []
        self.logs: list[Path] = []
        self.ready: list[str] = []
        self.nodes = [f"{mode}-w{i + 1}" for i in range(count)]

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
                    "--mode",
                    self.mode,
                    "--limit",
                    str(self.args.limit),
                    "--recorder",
                    self.args.recorder,
                    "--recorders",
                    str(self.args.recorder_connections),
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
        for text in self.ready:
            if text.split()[1] != EXPECTED_STAGER[self.mode]:
                raise VerificationError(
                    f"worker built {text!r}, expected a {EXPECTED_STAGER[self.mode]}"
                )

    def pids(self) -> list[int]:
        """The worker processes' pids."""
        return [proc.pid for proc in self.procs]

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


async def backend_pids(pool: AsyncConnectionPool) -> list[int]:
    """Server pids of the worker processes' connections to this database."""
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT pid FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = %s",
            [WORKER_APP],
        )
        return [int(row[0]) for row in await cursor.fetchall()]


async def run_workload(
    side: FireSide, group: WorkerGroup, workload: Workload, tag: str
) -> FireResult:
    """Schedule the workload in one transaction, wait for it to fire, read the lateness.

    CPU is sampled (worker processes, and the server backends of their connections) just
    before the first timer is due and once every timer has fired.
    """
    pool, config = side.pool, side.config
    prefix = f"fire-{tag}-{workload.name}-{uuid.uuid4().hex[:6]}-"
    per_scope = 100
    started = time.perf_counter()
    async with pool.connection() as conn:
        for start in range(0, len(workload.delays_ms), per_scope):
            chunk = workload.delays_ms[start : start + per_scope]
            effects = [make_effect(start + j + 1, d) for j, d in enumerate(chunk)]
            scope = f"{prefix}{start // per_scope}"
            await _schedule.schedule_many(config, scope, effects, conn=conn)
    schedule_s = time.perf_counter() - started
    first_due_in = min(workload.delays_ms) / 1000 - (time.perf_counter() - started)
    await asyncio.sleep(max(0.0, first_due_in - 0.05))
    pids = await backend_pids(pool)
    workers0, db0 = cpu_of(group.pids()), cpu_of(pids)
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
        await asyncio.sleep(0.05)
    workers1, db1 = cpu_of(group.pids()), cpu_of(pids + await backend_pids(pool))
    await asyncio.sleep(0.2)  # late duplicates, if any
    async with pool.connection() as conn:
        cursor = await conn.execute(LATENESS_SQL, {"worker": TIMER_WORKER, "pattern": pattern})
        rows = await cursor.fetchall()
    per_node = dict.fromkeys(group.nodes, 0)
    for row in rows:
        per_node[row[0]] = per_node.get(row[0], 0) + 1
    fires = [float(r[4]) for r in rows] or [0.0]
    return FireResult(
        expected,
        lateness=[float(r[1]) for r in rows],
        pickup=[float(r[2]) for r in rows],
        run=[float(r[3]) for r in rows],
        per_node=per_node,
        first_fire=min(fires),
        last_fire=max(fires),
        first_due=min((float(r[5]) for r in rows), default=0.0),
        schedule_s=schedule_s,
        worker_cpu_s=cpu_spent(workers0, workers1) if workers0 else None,
        db_cpu_s=cpu_spent(db0, db1) if db0 else None,
    )


def median_by_rate(results: list[FireResult]) -> FireResult:
    """The round with the median rate (the lower middle one for an even count)."""
    ordered = sorted(results, key=FireResult.rate)
    return ordered[(len(ordered) - 1) // 2]


def fire_workloads(args: argparse.Namespace) -> list[Workload]:
    """Stream, paced, sparse (lateness targets) and burst (capacity)."""
    lead = args.fire_lead_ms
    n = args.fire_timers
    window_ms = int(args.fire_window * 1000)
    paced = max(1, round(args.paced_rate * args.paced_seconds))
    return [
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
            f"{args.burst_timers:,} timers due at the same instant, {args.bursts} rounds "
            "(capacity: rate from the first fire to the last; the median round is shown)",
            [lead] * args.burst_timers,
            targeted=False,
        ),
    ]


type FireResults = dict[tuple[int, str, str], list[FireResult]]
"""Every run of section 3 by (process count, mode, workload), in round order."""


async def bench_firing(server: Server, args: argparse.Namespace) -> list[tuple[str, bool]]:
    """Section 3; returns the verdicts."""
    modes: list[str] = args.modes
    workloads = [w for w in fire_workloads(args) if w.name in args.workloads]
    recorder = (
        "recorded in memory on the database clock, written every 50 ms"
        if args.recorder == "memory"
        else "one INSERT per fire"
    )
    print(
        f"\n3. Firing: worker processes each running Oban with queues={{'timers': {args.limit}}};"
        f" delivery: {recorder}"
    )
    print(
        "   ours = default configuration (statifier_oban imported: PromptStager sleeping until "
        "the next due time, batched acks, one-statement fetch); today = main before issue 12 "
        "(0.1 s polling stager, oban's fetch and acks); stock = oban alone (1 s Stager)"
    )
    print(
        "   lateness = recorded fire time - scheduled_at (both database clock); "
        f"timers scheduled {args.fire_lead_ms} ms ahead in one transaction; CPU per fired "
        "timer: worker processes and their server backends, from just before the first due "
        "time to the last fire"
    )
    for w in workloads:
        print(f"   {w.name}: {w.description}")
    results = await run_firing(server, args, modes, workloads)
    print_firing(results, args, modes, workloads)
    check_firing(results, args)
    return firing_goals(results, args, modes, workloads)


async def run_firing(
    server: Server, args: argparse.Namespace, modes: list[str], workloads: list[Workload]
) -> FireResults:
    """Start every worker group, run every workload (bursts ``--bursts`` times) on each."""
    configs = [(procs, mode) for procs in args.processes for mode in modes]
    sides: dict[tuple[int, str], FireSide] = {}
    groups: dict[tuple[int, str], WorkerGroup] = {}
    log_dir = Path(tempfile.mkdtemp(prefix="statifier-bench-workers-"))
    results: FireResults = {}
    try:
        for procs, mode in configs:
            url = await server.create_database(f"fire_{mode}{procs}")
            pool = await open_pool(url, max_size=2)
            oban, config = make_client(pool, f"fire_{mode}{procs}")
            sides[(procs, mode)] = FireSide(url, pool, oban, config)
            async with pool.connection() as conn:
                await conn.execute(FIRES_DDL)
            groups[(procs, mode)] = WorkerGroup(url, procs, mode, args, log_dir)
        for group in groups.values():
            await group.start()
        await asyncio.sleep(0.5)
        runs = [w for w in workloads if w.name != "burst"]
        runs += [w for w in workloads if w.name == "burst"] * args.bursts
        for k, w in enumerate(runs):
            shift = k % len(configs)
            for procs, mode in configs[shift:] + configs[:shift]:
                result = await run_workload(
                    sides[(procs, mode)], groups[(procs, mode)], w, f"{procs}{mode}"
                )
                results.setdefault((procs, mode, w.name), []).append(result)
    finally:
        for group in groups.values():
            await group.stop()
        shutil.rmtree(log_dir, ignore_errors=True)
        for side in sides.values():
            forget_oban(side.oban)
            await side.pool.close()
            server.drop_database(side.url)

    return results


def median_of(results: FireResults, procs: int, mode: str, name: str) -> FireResult:
    """The run of a workload shown in the table: the one with the median rate."""
    return median_by_rate(results[(procs, mode, name)])


def print_firing(
    results: FireResults, args: argparse.Namespace, modes: list[str], workloads: list[Workload]
) -> None:
    """The table of runs, and every burst round's rate."""

    def pair(values: list[float]) -> str:
        return f"{percentile(values, 50):,.0f} / {percentile(values, 99):,.0f}"

    table: list[list[str]] = []
    for procs in args.processes:
        for mode in modes:
            for w in workloads:
                r = median_of(results, procs, mode, w.name)
                lat = r.lateness
                table.append(
                    [
                        f"{procs} proc" + ("s" if procs > 1 else ""),
                        mode,
                        w.name,
                        f"{r.delivered}/{r.expected}",
                        f"{percentile(lat, 50):,.0f}",
                        f"{percentile(lat, 99):,.0f}",
                        f"{max(lat) if lat else float('nan'):,.0f}",
                        pair(r.pickup),
                        pair(r.run),
                        f"{r.rate():,.0f}",
                        r.cpu_ms(r.worker_cpu_s),
                        r.cpu_ms(r.db_cpu_s),
                        "/".join(str(r.per_node[k]) for k in sorted(r.per_node)),
                    ]
                )
    print()
    print_table(
        [
            "workers",
            "mode",
            "workload",
            "delivered",
            "p50 ms",
            "p99 ms",
            "max ms",
            "pickup p50/p99",
            "run p50/p99",
            "timers/s",
            "worker CPU ms/timer",
            "db CPU ms/timer",
            "per node",
        ],
        table,
        left=3,
    )
    bursts = any(w.name == "burst" for w in workloads)
    if bursts:
        print("\n   burst rounds, fired timers/s (all processes, first fire to last):")
    for procs in args.processes if bursts else []:
        for mode in modes:
            rates = " ".join(f"{r.rate():,.0f}" for r in results[(procs, mode, "burst")])
            print(f"     {procs} proc{'s' if procs > 1 else ' '} {mode:5}  {rates}")


def check_firing(results: FireResults, args: argparse.Namespace) -> None:
    """A note for runs scheduled too slowly; a failed run if fires and timers differ."""
    for (procs, mode, name), rounds in results.items():
        for r in rounds:
            if r.schedule_s * 1000 > args.fire_lead_ms:
                print(
                    f"   note: {procs} proc {mode} {name}: scheduling took {r.schedule_s:.2f} s, "
                    f"longer than the {args.fire_lead_ms} ms lead"
                )
            if r.delivered != r.expected:
                raise VerificationError(
                    f"{procs} proc {mode} {name}: {r.delivered} fire records for "
                    f"{r.expected} timers"
                )


@dataclass
class Goals:
    """The goals' table rows and the verdicts (only for goals with a target)."""

    rows: list[list[str]] = field(default_factory=list)
    verdicts: list[tuple[str, bool]] = field(default_factory=list)

    def add(self, name: str, value: float, rounds: str, target: str, met: bool | None) -> None:
        """One figure; ``met`` None for context (no verdict)."""
        self.rows.append(
            [name, f"{value:.2f}", rounds, target, "-" if met is None else verdict(met)]
        )
        if met is not None:
            self.verdicts.append((f"{name} ({value:.2f}, target {target})", met))


def paired_ratios(
    results: FireResults, a: tuple[int, str], b: tuple[int, str]
) -> tuple[float, list[float]]:
    """Median over the burst rounds of a/b (each round's two runs back to back), and all."""
    ratios = [
        x.rate() / y.rate()
        for x, y in zip(results[(*a, "burst")], results[(*b, "burst")], strict=True)
        if y.rate() > 0
    ]
    return percentile(ratios, 50), ratios


def rate_goals(
    goals: Goals, results: FireResults, args: argparse.Namespace, modes: list[str]
) -> None:
    """ours/today on one worker, 2 workers over 1 (a verdict for ours), ours/stock."""
    pairs: list[tuple[str, tuple[int, str], tuple[int, str], float | None]] = []
    if 1 in args.processes and "ours" in modes and "today" in modes:
        pairs.append(
            ("fired timers/s, 1 worker, ours/today", (1, "ours"), (1, "today"), RATE_TARGET)
        )
    if 1 in args.processes and 2 in args.processes:
        pairs += [
            (f"fired timers/s, 2 workers/1, {mode}", (2, mode), (1, mode),
             SCALE_TARGET if mode == "ours" else None)
            for mode in modes
        ]  # fmt: skip
    if "stock" in modes and "ours" in modes:
        pairs += [
            (f"fired timers/s, {procs} proc, ours/stock", (procs, "ours"), (procs, "stock"), None)
            for procs in args.processes
        ]
    for name, a, b, target in pairs:
        value, ratios = paired_ratios(results, a, b)
        goals.add(
            name,
            value,
            " ".join(f"{r:.2f}" for r in ratios),
            "context" if target is None else f">= {target:.1f}",
            None if target is None else value >= target,
        )


def lateness_goals(
    goals: Goals,
    results: FireResults,
    args: argparse.Namespace,
    modes: list[str],
    workloads: list[Workload],
) -> None:
    """p99 lateness of the targeted workloads (a verdict for ours)."""
    for procs in args.processes:
        for w in (w for w in workloads if w.targeted):
            for mode in modes:
                p99 = percentile(median_of(results, procs, mode, w.name).lateness, 99)
                goals.add(
                    f"p99 lateness ms, {procs} proc, {w.name}, {mode}",
                    p99,
                    "",
                    f"< {LATENESS_TARGET_MS:.0f}",
                    p99 < LATENESS_TARGET_MS if mode == "ours" else None,
                )


def firing_goals(
    results: FireResults, args: argparse.Namespace, modes: list[str], workloads: list[Workload]
) -> list[tuple[str, bool]]:
    """Print the goals' figures; return the verdicts."""
    goals = Goals()
    if any(w.name == "burst" for w in workloads):
        rate_goals(goals, results, args, modes)
    lateness_goals(goals, results, args, modes, workloads)
    print(
        "\n   goals (verdicts for ours; the other modes' figures are context). A rate ratio is "
        "the median over the burst rounds of the ratio within each round (its runs are back "
        "to back), every round's ratio listed:"
    )
    print_table(["figure", "value", "rounds", "target", "verdict"], goals.rows)
    return goals.verdicts


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
    parser.add_argument("--fire-timers", type=int, help="timers of the stream [2000]")
    parser.add_argument("--burst-timers", type=int, help="timers of one burst [5000]")
    parser.add_argument("--bursts", type=int, help="burst rounds per mode and process count [7]")
    parser.add_argument(
        "--modes",
        default=",".join(MODES),
        help=f"worker configurations to run (of {', '.join(MODES)}) [all]",
    )
    parser.add_argument(
        "--workloads",
        default="stream,paced,sparse,burst",
        help="firing workloads to run [stream,paced,sparse,burst]",
    )
    parser.add_argument(
        "--recorder",
        choices=("memory", "insert"),
        default="memory",
        help="how the workers' delivery records a fire (see timers_worker.py) [memory]",
    )
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
        help="connections each worker's delivery uses with --recorder insert [10]",
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
        "burst_timers": 5000,
        "bursts": 7,
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
        "burst_timers": 500,
        "bursts": 1,
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
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    args.workloads = {w.strip() for w in args.workloads.split(",") if w.strip()}
    unknown = [m for m in args.modes if m not in MODES]
    if unknown or not args.modes:
        parser.error(f"--modes takes some of {', '.join(MODES)}, not {args.modes!r}")
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
