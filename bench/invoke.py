"""Invocation benchmark: statifier_oban's invoke path against raw oban jobs, in one run.

Run from the repository root::

    uv run python bench/invoke.py [--quick] [--database-url CONNINFO]

Throughput, in invocations per second, through the whole path: enqueue -> run -> deliver.

* **ours**: ``_enqueue.enqueue`` (the call ``InvokeHandler.start`` makes when a session
  enters an invoking state) stores one invocation job; a worker process runs it through
  ``InvokeWorker`` (decode, resolve handler and delivery, run a trivial handler answering
  ``Ok``, telemetry) and delivers the answer through a counting delivery that writes one row.
* **raw**: ``Oban.enqueue`` of a plain job with the same args (the same dict, so the same
  size) and meta; a trivial worker's ``process`` makes the same one-row write and returns
  None.

The delivery is a counting one (one ``INSERT`` into ``bench_answers``), not a live session:
a session lives in one process, and with two worker processes oban hands a job to whichever
process fetches it first, where the default ``SessionInvokeDelivery`` would find no session
and discard the answer. The raw worker makes exactly the same write, so the comparison
isolates what our layer adds. Worker processes are this same file run with ``--worker``
(so the job rows name ``__main__:BenchHandler``, which each worker resolves to itself).

Each round enqueues ``--jobs`` invocations from ``--enqueuers`` concurrent tasks in this
process while 1 (then 2) worker processes run them (``pipeline``); the rate is jobs divided
by the time from the first enqueue to the last answer (both read off the database clock).
A ``drain`` round stores the jobs first on a queue nobody runs and then moves them onto the
running queue at once: the run -> deliver half alone. Ours and raw run as a pair, back to
back (order alternating), ``--repeats`` pairs per mode; the worker processes' CPU time per
invocation is read from ``/proc`` as well (steadier than wall time on a shared machine,
though not immune to it). Target: ours/raw >= 0.7 (our overhead at most 30%) on the median
of the pipeline pairs' ratios, reported PASS or BELOW; the exit status is 1 only on a crash
or a failed verification. Last, ``InvokeWorker.process`` is timed in-process on an in-memory job (no
database, no oban) against a raw ``process``: our worker layer's own Python cost per
invocation. The embedded PostgreSQL server is used unless ``--database-url``
names a server; the benchmark database is created there and dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import os
import platform
import statistics
import sys
import time
import traceback
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from oban import Job, Oban
from oban.worker import register_worker, worker_name
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg_pool import AsyncConnectionPool
from statifier.core.effects import Invoke
from statifier_oban import (
    Config,
    Delivered,
    InvokeHandler,
    Ok,
    RunContext,
    RunResult,
    register_plugin,
)
from statifier_oban._names import INVOKE_WORKER, META_DELIVERY
from statifier_oban.embedded import EmbeddedPostgres
from statifier_oban.invocations import _args, _enqueue
from statifier_oban.rows._resolve import path_of
from statifier_oban.schema import install
from worker_processes import WorkerProcesses, serve_until_stdin_closes

TARGET = 0.7
"""Ours/raw invocations per second must be at least this (our overhead at most 30%)."""

OURS_QUEUE = "invokes"
RAW_QUEUE = "raw"

ANSWER_SQL = "INSERT INTO bench_answers (kind, scope, invoke_id, node) VALUES (%s, %s, %s, %s)"
"""The one write both paths make per invocation (``answered_at`` defaults to the clock)."""

ANSWERS_TABLE = """
CREATE TABLE bench_answers (
    id bigserial PRIMARY KEY,
    kind text NOT NULL,
    scope text NOT NULL,
    invoke_id text NOT NULL,
    node text NOT NULL,
    answered_at timestamp NOT NULL DEFAULT timezone('UTC', clock_timestamp())
);
CREATE INDEX bench_answers_scope ON bench_answers (scope);
"""

PAD = "x" * 200
"""Params padding, so the args are the size of a small real invocation (ids plus a note)."""

# --------------------------------------------------------------------------- worker side

_answers: AsyncConnectionPool | None = None
"""The pool the counting delivery and the raw worker write through (worker processes)."""

_node = "?"


async def record(kind: str, scope: str, invoke_id: str) -> None:
    """The delivery write: one ``bench_answers`` row."""
    if _answers is None:
        raise RuntimeError("bench/invoke.py: the answers pool is not open in this process")
    async with _answers.connection() as conn:
        await conn.execute(ANSWER_SQL, (kind, scope, invoke_id, _node))


class BenchHandler(InvokeHandler):
    """A trivial handler: answers ``Ok`` with a tiny payload."""

    def config(self) -> Config:
        """Not read on the ``Ok`` path (only a fan-out asks the handler for its config)."""
        raise RuntimeError("BenchHandler.config() is not used by this benchmark")

    async def run(self, invoke: Invoke, ctx: RunContext | None = None) -> RunResult:
        """Answer at once."""
        return Ok({"n": invoke.params["n"]})


class CountingDelivery:
    """An invoke delivery that records each answer (one row) and says ``Delivered()``."""

    async def deliver(
        self, scope: str, invoke_id: str, data: Any, caller_context: Any = None
    ) -> Delivered:
        """Record a done answer."""
        await record("ours", scope, invoke_id)
        return Delivered()

    async def deliver_failure(
        self,
        scope: str,
        invoke_id: str,
        reason: str,
        attempts: int,
        detail: str,
        caller_context: Any = None,
    ) -> Delivered:
        """Record a failure (the verification then fails the run)."""
        await record("failed", scope, invoke_id)
        return Delivered()


class RawInvoke:
    """The raw peer: a plain oban worker making the same write, returning None."""

    async def process(self, job: Job) -> None:
        """Record the answer."""
        await record("raw", job.args["scope"], job.args["invoke_id"])


class NullDelivery:
    """An invoke delivery that writes nothing (the in-process overhead measurement)."""

    async def deliver(
        self, scope: str, invoke_id: str, data: Any, caller_context: Any = None
    ) -> Delivered:
        """Say delivered."""
        return Delivered()

    async def deliver_failure(
        self,
        scope: str,
        invoke_id: str,
        reason: str,
        attempts: int,
        detail: str,
        caller_context: Any = None,
    ) -> Delivered:
        """Say delivered."""
        return Delivered()


class RawNull:
    """The raw peer of the in-process measurement: reads the identity, returns None."""

    async def process(self, job: Job) -> None:
        """Touch the args as a real worker would, do nothing else."""
        _ = (job.args["scope"], job.args["invoke_id"])


register_worker(RawInvoke)
# Job rows name the deliveries by this file's path; every worker process registers them.
register_plugin(CountingDelivery)
register_plugin(NullDelivery)

HANDLER_PATH = path_of(BenchHandler)
DELIVERY_PATH = path_of(CountingDelivery)
RAW_WORKER = worker_name(RawInvoke)


async def serve(url: str, node: str, limit: int) -> None:
    """Worker mode: run both queues with ``limit`` slots each until stdin closes."""
    global _answers, _node
    import statifier_oban.workers  # noqa: F401  (registers InvokeWorker)

    _node = node
    _answers = AsyncConnectionPool(url, min_size=limit, max_size=2 * limit, open=False)
    pool = AsyncConnectionPool(url, min_size=4, max_size=10, open=False)
    await _answers.open(wait=True)
    await pool.open(wait=True)
    queues: dict[str, int | dict[str, Any]] = {OURS_QUEUE: limit, RAW_QUEUE: limit}
    oban = Oban(pool=pool, name=f"bench_{node}", node=node, queues=queues)
    try:
        await serve_until_stdin_closes(oban)
    finally:
        await pool.close()
        await _answers.close()


# --------------------------------------------------------------------------- parent side


class VerificationError(RuntimeError):
    """A round did not do what it claims: its figure would be meaningless."""


@dataclass
class Server:
    """The PostgreSQL server and the benchmark database on it."""

    url: str
    embedded: EmbeddedPostgres | None
    database: str = field(default_factory=lambda: f"statifier_bench_invoke_{uuid.uuid4().hex[:8]}")

    @property
    def db_url(self) -> str:
        """Conninfo of the benchmark database."""
        return make_conninfo(self.url, dbname=self.database)

    async def create(self) -> None:
        """Create the database, install the schema and the answers table."""
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(
                    sql.Identifier(self.database)
                )
            )
        await install(self.db_url)
        with psycopg.connect(self.db_url, autocommit=True) as conn:
            conn.execute(ANSWERS_TABLE)

    def drop(self) -> None:
        """Drop the benchmark database."""
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(self.database)
                )
            )


@dataclass
class Round:
    """One timed round of one path."""

    path: str
    processes: int
    jobs: int
    seconds: float
    enqueue_seconds: float
    enqueue_cpu: float
    worker_cpu: float
    nodes: dict[str, int]

    @property
    def rate(self) -> float:
        """Invocations per second, first enqueue to last answer."""
        return self.jobs / self.seconds

    @property
    def enqueue_rate(self) -> float:
        """Enqueues per second (this process, ``--enqueuers`` tasks)."""
        return self.jobs / self.enqueue_seconds

    @property
    def worker_cpu_ms(self) -> float:
        """CPU milliseconds the worker processes spent per invocation (run, deliver, ack)."""
        return 1000 * self.worker_cpu / self.jobs

    @property
    def enqueue_cpu_ms(self) -> float:
        """CPU milliseconds this process spent per enqueue."""
        return 1000 * self.enqueue_cpu / self.jobs


def make_invoke(i: int) -> Invoke:
    """Invocation ``i`` of a round: its own invoke id, a small params map."""
    return Invoke(
        invoke_id=f"inv_{i}",
        type="bench:trivial",
        src=None,
        params={"n": i, "note": PAD},
        content=None,
        autoforward=False,
        state_index=1,
        invoke_index=0,
        caller_context=None,
        macrostep=1,
        microstep=1,
        round=0,
    )


class Bench:
    """The parent: enqueues rounds, waits for their answers, verifies, reports."""

    def __init__(self, url: str, args: argparse.Namespace) -> None:
        self.url = url
        self.args = args
        self.pool = AsyncConnectionPool(url, min_size=2, max_size=args.enqueuers + 2, open=False)
        self.client: Oban | None = None
        self.config: Config | None = None
        self.hold_config: Config | None = None

    async def open(self) -> None:
        """Open the pool; build the client-mode Oban and the config ours enqueues with."""
        await self.pool.open(wait=True)
        self.client = Oban(pool=self.pool, name=f"bench_client_{uuid.uuid4().hex[:6]}")
        self.config = Config(
            oban=self.client,
            timers_queue="timers",
            invoke_queue=OURS_QUEUE,
            invoke_delivery=DELIVERY_PATH,
        )
        self.hold_config = Config(
            oban=self.client,
            timers_queue="timers",
            invoke_queue=f"{OURS_QUEUE}_hold",
            invoke_delivery=DELIVERY_PATH,
        )

    async def close(self) -> None:
        """Close the pool."""
        await self.pool.close()

    async def scalar(self, query: Any, params: Sequence[Any] = ()) -> Any:
        """One value from one query."""
        async with self.pool.connection() as conn:
            row = await (await conn.execute(query, params)).fetchone()
        return None if row is None else row[0]

    async def enqueue_ours(self, scope: str, i: int, queue: str = OURS_QUEUE) -> None:
        """Our path: ``_enqueue.enqueue``, as ``InvokeHandler.start`` calls it."""
        config = self.config if queue == OURS_QUEUE else self.hold_config
        assert config is not None  # noqa: S101 - open() ran first (measure)
        await _enqueue.enqueue(config, BenchHandler, scope, make_invoke(i))

    async def enqueue_raw(self, scope: str, i: int, queue: str = RAW_QUEUE) -> None:
        """The raw path: the same args and meta on a plain oban job."""
        assert self.client is not None  # noqa: S101 - open() ran first (measure)
        args = _args.encode(scope, HANDLER_PATH, make_invoke(i), None)
        job = Job(RAW_WORKER, queue=queue, args=args, meta={META_DELIVERY: DELIVERY_PATH})
        await self.client.enqueue(job)

    async def enqueue_all(
        self, path: str, scope: str, jobs: int, queue: str
    ) -> tuple[float, float]:
        """Enqueue ``jobs`` invocations from ``--enqueuers`` tasks; wall and CPU seconds."""
        enqueuers = self.args.enqueuers

        async def enqueuer(k: int) -> None:
            for i in range(k, jobs, enqueuers):
                if path == "ours":
                    await self.enqueue_ours(scope, i, queue)
                else:
                    await self.enqueue_raw(scope, i, queue)

        t0, c0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(enqueuer(k) for k in range(enqueuers)))
        return time.perf_counter() - t0, time.process_time() - c0

    async def round(self, path: str, workers: WorkerProcesses, jobs: int, mode: str) -> Round:
        """One round; the figures. Verified: every invocation answered once, jobs completed.

        ``pipeline``: enqueue while the workers run (timed from the first enqueue to the
        last answer). ``drain``: store every job first on a queue nobody runs, then move
        them onto the running queue at once (timed from the move to the last answer): the
        run -> deliver half alone.
        """
        processes = workers.count
        scope = f"{path}_{mode}_{processes}p_{uuid.uuid4().hex[:8]}"
        queue = OURS_QUEUE if path == "ours" else RAW_QUEUE
        if mode == "pipeline":
            cpu_before = workers.cpu_seconds()
            started_at = await self.scalar("SELECT timezone('UTC', clock_timestamp())")
            enqueue_seconds, enqueue_cpu = await self.enqueue_all(path, scope, jobs, queue)
        else:
            enqueue_seconds, enqueue_cpu = await self.enqueue_all(
                path, scope, jobs, f"{queue}_hold"
            )
            cpu_before = workers.cpu_seconds()
            async with self.pool.connection() as conn:
                started_at = await (
                    await conn.execute("SELECT timezone('UTC', clock_timestamp())")
                ).fetchone()
                await conn.execute(
                    "UPDATE oban_jobs SET queue = %s WHERE queue = %s AND args->>'scope' = %s",
                    [queue, f"{queue}_hold", scope],
                )
                await conn.execute(
                    "SELECT pg_notify('public.oban_insert', %s)", [json.dumps({"queue": queue})]
                )
            assert started_at is not None  # noqa: S101 - a SELECT without FROM: one row
            started_at = started_at[0]
        deadline = time.monotonic() + max(60.0, jobs / 20)
        while True:
            count = await self.scalar(
                "SELECT count(*) FROM bench_answers WHERE scope = %s", [scope]
            )
            if count >= jobs:
                break
            if time.monotonic() > deadline:
                raise VerificationError(f"{path}: {count}/{jobs} answers after the deadline")
            await asyncio.sleep(0.02)
        last = await self.scalar(
            "SELECT max(answered_at) FROM bench_answers WHERE scope = %s", [scope]
        )
        nodes = await self.verify(path, scope, jobs)  # waits for every ack, too
        worker_cpu = workers.cpu_seconds() - cpu_before
        seconds = (last - started_at).total_seconds()
        return Round(
            path, processes, jobs, seconds, enqueue_seconds, enqueue_cpu, worker_cpu, nodes
        )

    async def verify(self, path: str, scope: str, jobs: int) -> dict[str, int]:
        """Every invocation answered once, on its path, and every job completed."""
        async with self.pool.connection() as conn:
            kinds: dict[str, int] = dict(
                await (
                    await conn.execute(
                        "SELECT kind, count(DISTINCT invoke_id) FROM bench_answers "
                        "WHERE scope = %s GROUP BY kind",
                        [scope],
                    )
                ).fetchall()
            )
            total = await (
                await conn.execute("SELECT count(*) FROM bench_answers WHERE scope = %s", [scope])
            ).fetchone()
            nodes: dict[str, int] = dict(
                await (
                    await conn.execute(
                        "SELECT node, count(*) FROM bench_answers WHERE scope = %s GROUP BY node",
                        [scope],
                    )
                ).fetchall()
            )
        if kinds != {path: jobs} or total is None or total[0] != jobs:
            raise VerificationError(f"{path}: answers by kind {kinds}, {total} rows, {jobs} jobs")
        worker = INVOKE_WORKER if path == "ours" else RAW_WORKER
        deadline = time.monotonic() + 30
        while True:  # the ack lands a moment after the answer
            async with self.pool.connection() as conn:
                states: dict[str, int] = dict(
                    await (
                        await conn.execute(
                            "SELECT state::text, count(*) FROM oban_jobs "
                            "WHERE worker = %s AND args->>'scope' = %s GROUP BY 1",
                            [worker, scope],
                        )
                    ).fetchall()
                )
            if states == {"completed": jobs}:
                break
            if time.monotonic() > deadline:
                raise VerificationError(f"{path}: job states {states}, expected {jobs} completed")
            await asyncio.sleep(0.05)
        async with self.pool.connection() as conn:  # keep the table the same size for all
            await conn.execute(
                "DELETE FROM oban_jobs WHERE worker = %s AND args->>'scope' = %s", [worker, scope]
            )
        return nodes


def verdict(ok: bool) -> str:
    """PASS or BELOW."""
    return "PASS" if ok else "BELOW"


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


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A plain text table, first column left-aligned."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  " + "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    print(line(headers))
    print("  " + "  ".join("-" * w for w in widths))
    for row in rows:
        print(line(row))


MODES = ("pipeline", "drain")
"""``pipeline`` (enqueue -> run -> deliver, overlapped: the target) and ``drain``."""


async def run_rounds(
    server: Server, args: argparse.Namespace
) -> dict[tuple[str, str, int], list[Round]]:
    """Every round (after a warm-up), by (mode, path, processes), each printed as it ends."""
    bench = Bench(server.db_url, args)
    await bench.open()
    results: dict[tuple[str, str, int], list[Round]] = {}
    try:
        for processes in args.processes:
            workers = WorkerProcesses(
                str(Path(__file__).resolve()), server.db_url, processes, args.limit
            )
            await workers.start()
            try:
                for mode in MODES:  # warm-up: imports, pools, plans
                    for path in ("ours", "raw"):
                        await bench.round(path, workers, max(20, args.jobs // 10), mode)
                for r in range(args.repeats):
                    # A pair: ours and raw back to back (order alternating), so both see
                    # about the same machine; the pair's ratio is what the verdict reads.
                    order = ("ours", "raw") if r % 2 == 0 else ("raw", "ours")
                    for mode in MODES:
                        for path in order:
                            done = await bench.round(path, workers, args.jobs, mode)
                            results.setdefault((mode, path, processes), []).append(done)
                            print(
                                f"  {processes} proc, pair {r + 1}, {mode:8} {path:4}: "
                                f"{done.rate:7.1f} inv/s ({done.seconds:5.2f} s), worker CPU "
                                f"{done.worker_cpu_ms:.2f} ms/inv, enqueue "
                                f"{done.enqueue_rate:.0f}/s, by node "
                                f"{json.dumps(done.nodes, sort_keys=True)}",
                                flush=True,
                            )
            finally:
                await workers.stop()
    finally:
        await bench.close()
    return results


async def measure(server: Server, args: argparse.Namespace) -> bool:
    """Run every round; print the tables; whether the target held everywhere."""
    results = await run_rounds(server, args)
    print()
    rows: list[list[str]] = []
    for mode in MODES:
        for processes in args.processes:
            for path in ("ours", "raw"):
                rounds = results[(mode, path, processes)]
                rates = [r.rate for r in rounds]
                rows.append(
                    [
                        f"{mode}, {path}, {processes} proc" + ("s" if processes > 1 else ""),
                        f"{max(rates):,.1f}",
                        f"{statistics.median(rates):,.1f}",
                        f"{statistics.median(r.worker_cpu_ms for r in rounds):.2f}",
                        f"{statistics.median(r.enqueue_cpu_ms for r in rounds):.2f}",
                        " ".join(f"{x:.0f}" for x in rates),
                    ]
                )
    print_table(
        [
            "mode, path, workers",
            "best inv/s",
            "median inv/s",
            "worker CPU ms/inv",
            "enqueue CPU ms/inv",
            "all rounds inv/s",
        ],
        rows,
    )
    print()
    print(
        f"  target (pipeline): ours/raw >= {TARGET} (our overhead at most "
        f"{100 - 100 * TARGET:.0f}%), read on the median of the paired rounds' ratios; "
        "drain is for reading only"
    )
    ratio_rows: list[list[str]] = []
    held = True
    for mode in MODES:
        for processes in args.processes:
            ours = results[(mode, "ours", processes)]
            raw = results[(mode, "raw", processes)]
            pairs = [o.rate / r.rate for o, r in zip(ours, raw, strict=True)]
            paired = statistics.median(pairs)
            cpu = statistics.median(r.worker_cpu_ms for r in raw) / statistics.median(
                o.worker_cpu_ms for o in ours
            )
            if mode == "pipeline":
                held = held and paired >= TARGET
            ratio_rows.append(
                [
                    f"{mode}, {processes} worker process" + ("es" if processes > 1 else ""),
                    f"{paired:.3f}",
                    " ".join(f"{x:.2f}" for x in pairs),
                    f"{max(o.rate for o in ours) / max(r.rate for r in raw):.3f}",
                    f"{cpu:.3f}",
                    verdict(paired >= TARGET) if mode == "pipeline" else "-",
                ]
            )
    print_table(
        [
            "mode, workers",
            "ours/raw (median pair)",
            "pairs",
            "best/best",
            "raw/ours worker CPU",
            "verdict",
        ],
        ratio_rows,
    )
    return held


async def overhead(args: argparse.Namespace) -> None:
    """Our worker layer's own Python cost per invocation, with no database and no oban.

    ``InvokeWorker.process`` on an in-memory job (decode, resolve handler and delivery, run
    ``BenchHandler``, telemetry, a ``NullDelivery``) against ``RawNull.process`` on the same
    job; best of 3 runs of ``n`` calls each: the steadiest figure of the three.
    """
    from statifier_oban.workers import InvokeWorker

    n = 2_000 if args.quick else 20_000
    args_dict = _args.encode("scope_1", HANDLER_PATH, make_invoke(1), None)
    job = Job(
        INVOKE_WORKER,
        id=1,
        args=args_dict,
        meta={META_DELIVERY: path_of(NullDelivery)},
        attempt=1,
        max_attempts=20,
    )
    ours, raw = InvokeWorker(), RawNull()
    if await ours.process(job) is not None:
        raise VerificationError("InvokeWorker did not complete the in-memory job")

    async def best(worker: Any) -> float:
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(n):
                await worker.process(job)
            times.append((time.perf_counter() - t0) / n)
        return min(times)

    ours_s, raw_s = await best(ours), await best(raw)
    print()
    print(f"  in-process worker overhead (no database, {n} calls, best of 3):")
    print(
        f"    InvokeWorker.process {1e6 * ours_s:.1f} us/inv, raw process {1e6 * raw_s:.1f} "
        f"us/inv: our layer adds {1e6 * (ours_s - raw_s):.1f} us per invocation"
    )


def print_header(server: Server, args: argparse.Namespace) -> None:
    """Versions, sizes and server settings that shape the figures."""
    with psycopg.connect(server.url, autocommit=True) as conn:
        settings = {
            name: str(
                (conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone() or ["?"])[
                    0
                ]
            )
            for name in ("server_version", "fsync", "synchronous_commit")
        }
    where = "embedded (own data dir)" if server.embedded else "--database-url"
    print(
        f"statifier_oban invoke benchmark: Python {platform.python_version()}, "
        f"oban {package_version('oban')}, psycopg {package_version('psycopg')}, "
        f"{os.cpu_count()} CPUs, load average {load_average()}"
    )
    print(
        f"PostgreSQL {settings['server_version']} ({where}), fsync={settings['fsync']}, "
        f"synchronous_commit={settings['synchronous_commit']}"
    )
    print(
        f"{args.jobs} invocations per round, {args.repeats} ours/raw pairs per mode, "
        f"{args.enqueuers} enqueuing tasks, queue limit {args.limit} per worker process, "
        f"worker processes {', '.join(map(str, args.processes))}"
    )
    print()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line (``--worker`` is the worker-process mode, used internally)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--database-url", help="server to use (creates and drops a database)")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--jobs", type=int, help="invocations per round [600; quick 200]")
    parser.add_argument("--repeats", type=int, help="ours/raw pairs per mode [5; quick 1]")
    parser.add_argument("--enqueuers", type=int, default=4, help="concurrent enqueuing tasks")
    parser.add_argument("--limit", type=int, default=10, help="queue limit per worker process")
    parser.add_argument(
        "--processes",
        default="1,2",
        type=lambda text: [int(x) for x in text.split(",")],
        help="worker process counts to measure [1,2]",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--node", default="w1", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.jobs is None:
        args.jobs = 200 if args.quick else 600
    if args.repeats is None:
        args.repeats = 1 if args.quick else 5
    return args


async def run(args: argparse.Namespace) -> int:
    """Start (or reach) the server, create the database, measure, clean up."""
    embedded = None
    if args.database_url is None:
        embedded = await asyncio.to_thread(EmbeddedPostgres.start)
    server = Server(embedded.url if embedded is not None else args.database_url, embedded)
    try:
        print_header(server, args)
        await server.create()
        try:
            held = await measure(server, args)
        finally:
            server.drop()
        await overhead(args)
        print(f"\n  overall: {verdict(held)}")
        return 0
    finally:
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark (or, with ``--worker``, one worker process)."""
    args = parse_args(argv)
    try:
        if args.worker:
            asyncio.run(serve(args.url, args.node, args.limit))
            return 0
        return asyncio.run(run(args))
    except VerificationError as exc:
        print(f"verification failed: {exc}", file=sys.stderr)
        return 1
    except Exception:
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main())
