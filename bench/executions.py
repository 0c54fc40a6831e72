"""Durable-execution benchmark: timers fired into executions by worker processes.

Run from the repository root::

    uv run python bench/executions.py [--quick] [--baseline DIR] [--database-url CONNINFO]

Goals, each a verdict at the end (``bench/README.md`` has the procedure and a run):

- **issue 25**: at least 2,000 steps/s with one worker process; two worker processes at
  least 1.3x one; worker CPU per step at most 0.3 ms (PostgreSQL's CPU per step is
  reported); with ``--baseline``, the steps/s of the code in ``DIR`` ("today") in the
  same run, for the issue's "about 5x today".
- **issue 8**: a step with its timer costs at most 2x a raw oban job round trip (ours/raw
  at least 0.5), with 1 and with 2 worker processes.
- **issue 20**: history costs at most 15% (ours/quiet at least 0.85).
- **issue 22** (ADR 30): tracing on, with no exporter, keeps at least 90% of the
  throughput (traced/ours at least 0.9, and traced/untraced in-process steps).
  ``--otel api`` (the default) instruments through the OpenTelemetry API with no SDK
  configured, what ``instrument()`` costs an application that exports nothing; ``--otel
  sdk`` through the SDK's tracer and meter providers with no span processor and no metric
  reader (every span and metric recorded, nothing leaves).

1. **fire -> step -> commit.** Paths, each on queues of its own and run by worker
   processes of its own (this file with ``--worker``: what ``statifier-oban worker`` runs
   for executions, plus the raw peers), one set of processes per process count, all up
   at once:

   - **ours**: ``--jobs`` executions each hold one pending timer; one ``UPDATE`` makes
     them all due; each fires through ``TimerWorker`` and ``ExecutionDelivery`` into
     ``Executions.fire`` (steps that arrive together share a transaction: ADR 32): lock
     the row and check the job's key, drive ``tick``, arm the next timer, store the
     position with the key and the history entry, commit; then oban acknowledges the job;
   - **today** (``--baseline DIR``): the same, by worker processes that import the
     packages in ``DIR`` first (``PYTHONPATH``: ``DIR/packages/<name>/src``), e.g.
     ``git archive`` of main before the change;
   - **quiet**: ours with history off (the peer of the history goal);
   - **traced**: ours served by worker processes of their own that trace as ``--otel``
     says, its executions created by a traced parent (with the SDK, each job then carries
     a trace context to continue) (the tracing goal);
   - **raw**: a bare oban job that, like a step, arms its successor (``process`` enqueues
     the next job, an hour out) (the peer of issue 8's goal);
   - **bare** (context): a job that arms nothing.

   A round prepares its path's jobs an hour out, makes them due with one ``UPDATE`` and
   measures from the first fetch (the first ``attempted_at``) to the last
   ``completed_at``, both on the database clock: staging latency is not a step's cost.
   Worker CPU (the path's processes) and PostgreSQL CPU (the server's processes, when the
   server is local) are read from ``/proc`` around the round, with the CPU the whole
   machine spent on other work meanwhile. One round of each path and process count per
   group, the order rotating, ``--repeats`` groups after a warm-up round of each; ratios
   are the median over the groups of each group's own ratio (a shared machine drifts
   within minutes; rounds of one group are seconds apart). Verification: every job
   ``completed``, every execution stepped exactly once with one step key and its history
   entries.
2. **in-process steps**: ``Executions.step`` called directly (one transaction each, a
   timer armed by each step), with history and without, traced (through the API alone,
   and recorded by the SDK, no exporter either way: traced/untraced is the tracing goal's
   second verdict), against ``Oban.enqueue`` of a bare job: ``--repeats`` rounds after a
   warm-up round, each of ``--steps`` steps a path in slices of ``--slice`` that the paths
   take in turn, the order rotating at every slice; figures are medians over the rounds,
   ratios the median of each round's own ratio, every round's printed.

3. **lone steps** (with ``--baseline`` only, ``lone_steps.py``): ``Executions.step``
   with nothing beside it, ours and today each in a process of its own taking turns, on
   this run's database: wall time, the process's CPU and its PostgreSQL backend's CPU per
   step, and ours/today of each (an A/B of what a lightly loaded system waits for).

``--callgrind`` runs neither: it profiles one worker process of the ours path under
valgrind's callgrind and prints the instructions a step costs, counted only while a
round runs (a warm-up round, then ``--repeats`` rounds of ``--jobs`` steps): a figure
that, unlike the timed rounds, the machine's other work does not move.

The embedded PostgreSQL server is used unless ``--database-url`` names a server; one
database is created there and dropped at the end. Exit status 1 only on a crash or a
failed verification; a missed target prints BELOW with the measurement that bounds it.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import callgrind_names
import lone_steps
import psycopg
import statifier
from cpu_meter import ServerCpu, machine_busy, process_cpu
from oban import Job, Oban
from oban.worker import register_worker, worker_name
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg_pool import AsyncConnectionPool
from run_options import positive, worker_loop
from statifier.core.effects import SendDelayed
from statifier.core.events import Event
from statifier_oban import register_plugin
from statifier_oban.cli._worker import freeze_startup_heap
from statifier_oban.embedded import EmbeddedPostgres
from statifier_oban.executions import ExecutionDelivery, ObanExecutor, execution_config, use
from statifier_oban.schema import install
from statifier_persistence import Executions, Stepped, StepResult
from statifier_persistence import install as install_persistence
from worker_processes import WorkerProcesses, serve_until_stdin_closes

STEPS_TARGET = 2000.0
"""Steps per second with one worker process (issue 25)."""

SCALE_TARGET = 1.3
"""Two worker processes / one, in steps per second (issue 25)."""

CPU_TARGET_MS = 0.3
"""Worker CPU per step, one worker process (issue 25)."""

RAW_TARGET = 0.5
"""Ours/raw jobs per second (issue 8: a step with its timer <= 2x a raw job)."""

HISTORY_TARGET = 0.85
"""Ours/quiet jobs per second (issue 20: history costs at most 15%)."""

TRACED_TARGET = 0.9
"""Traced/ours (and traced/untraced in-process steps) must be at least this (ADR 30)."""

OTEL_MODES = ("api", "sdk")
"""How a traced path is instrumented: the API with no SDK configured, or the SDK's
providers with no processor and no reader."""

POLL_FIRST_S = 0.02
POLL_MOST_S = 0.2
"""A round's wait for its jobs polls after 0.02 s, then twice as long each time, at most
0.2 s: a round's time is read from the jobs' own timestamps, so a later look changes only
when it ends. Each look reads every job of the round (about 4 ms of the server's CPU for
2,000 ids, and the harness's own for the array); polled every 0.02 s, the looks took some
of the cores the workers and the server were measured on, and their server time counted
as the steps' own."""

PROFILE_ENV = "STATIFIER_BENCH_WORKER_PROFILE"
"""Environment variable naming a directory: worker processes run under cProfile (CPU
time) and write ``<node>.prof`` there when they stop."""

POOL_JOBS = 14
"""A worker process's pool holds at most this many connections for jobs (and 6 more),
fewer when the server's ``max_connections`` shared among every worker process of the run
allows fewer (``--pool``)."""

SPARE_CONNECTIONS = 20
"""Connections of the server left to the parent process and PostgreSQL's own."""

PACKAGES = ("statifier", "statifier_persistence", "statifier_oban")
"""The packages a ``--baseline`` folder provides (``packages/<name>/src``)."""

CHART = statifier.compile(
    """<scxml xmlns="http://www.w3.org/2005/07/scxml" name="bench_ticker" initial="s">
  <datamodel><data id="n" expr="0"/></datamodel>
  <state id="s">
    <onentry><send id="tick" event="tick" delay="1h"/></onentry>
    <transition event="tick">
      <assign location="n" expr="n + 1"/>
      <send id="tick" event="tick" delay="1h"/>
    </transition>
  </state>
</scxml>"""
)
"""Every step (a fired ``tick``) counts and arms the next timer, an hour out."""

ALL_PATHS = ("ours", "today", "quiet", "traced", "raw", "bare")
"""The paths of section 1 (today only with ``--baseline``)."""

STEPPING = frozenset({"ours", "today", "quiet", "traced"})
"""The paths whose jobs are timers of executions."""


def queue_of(path: str, processes: int) -> str:
    """The queue of one path run by ``processes`` worker processes."""
    return f"{path}{processes}"


# --------------------------------------------------------------------------- worker side


_oban: Oban | None = None
"""The worker process's Oban instance (set by :func:`serve`)."""


class RawTick:
    """The raw peer's worker: a bare job round trip that, like a step, arms its successor
    (one ``Oban.enqueue`` of the next job, an hour out, on the job's own queue)."""

    async def process(self, job: Job) -> None:
        """Enqueue the successor, scheduled an hour out."""
        assert _oban is not None  # noqa: S101 - serve() sets it before the queue runs
        later = datetime.now(UTC) + timedelta(hours=1)
        await _oban.enqueue(
            Job(RAW_WORKER, queue=job.queue, args={"scope": job.args["scope"]}, scheduled_at=later)
        )


class BareTick:
    """Context only: a bare job that arms nothing and returns."""

    async def process(self, job: Job) -> None:
        """Touch the args as a real worker would."""
        _ = job.args["scope"]


_quiet: Executions | None = None
"""The worker process's ``Executions`` with history off (set by :func:`serve`)."""


class QuietDelivery(ExecutionDelivery):
    """The quiet path's timer delivery: ``ExecutionDelivery`` into the history-less
    ``Executions`` (the installed one, for the ours path, writes history)."""

    async def fire(
        self, executions: Executions, execution_id: str, delayed: SendDelayed, key: str | None
    ) -> StepResult:
        """Fire into the quiet ``Executions``."""
        assert _quiet is not None  # noqa: S101 - serve() sets it before the queue runs
        return await _quiet.fire(execution_id, delayed, key=key)


register_worker(RawTick)
register_worker(BareTick)
register_plugin(QuietDelivery)
RAW_WORKER = worker_name(RawTick)
BARE_WORKER = worker_name(BareTick)
QUIET_DELIVERY = f"{QuietDelivery.__module__}:{QuietDelivery.__qualname__}"


def instrument_without_exporter(mode: str) -> Any:
    """``statifier_oban.otel`` that exports nothing (``mode``: see ``OTEL_MODES``); returns
    the instrumentation (install and uninstall it with ``statifier.instrumentation``)."""
    from statifier_oban.otel import OpenTelemetry

    if mode == "api":
        return OpenTelemetry()  # the global providers: the API's, no SDK set in this process
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider

    return OpenTelemetry(TracerProvider(), MeterProvider())


async def serve(
    url: str, node: str, limit: int, role: str, processes: int, pool_max: int, otel: str
) -> None:
    """Worker mode: run the queues of ``role`` (``current``: ours, quiet, raw and bare;
    ``today``: today; ``traced``: traced, instrumented as ``otel`` says) for ``processes``
    worker processes, until stdin closes."""
    import statifier_oban.workers  # noqa: F401  (registers TimerWorker)

    # A group commit takes one connection for all its steps; the raw path takes one per
    # job, so a pool of the queue limit would hold 2 x 56 connections on the server.
    size = min(limit, POOL_JOBS) + 6
    if pool_max:
        size = min(size, pool_max)
    pool = AsyncConnectionPool(url, min_size=min(4, size), max_size=size, open=False)
    await pool.open(wait=True)
    global _oban, _quiet
    alone = role in ("today", "traced")
    paths = (role,) if alone else ("ours", "quiet", "raw", "bare")
    queues: dict[str, int | dict[str, Any]] = {queue_of(p, processes): limit for p in paths}
    oban = _oban = Oban(pool=pool, name=f"bench_{node}", node=node, queues=queues)
    stepping = role if alone else "ours"
    config = execution_config(oban, timers_queue=queue_of(stepping, processes))
    use(Executions(pool, executor=ObanExecutor(config)))
    if role == "traced":
        from statifier import instrumentation  # not at the top: a baseline may predate it

        instrumentation.install(instrument_without_exporter(otel))
    if not alone:
        quiet = execution_config(
            oban, timers_queue=queue_of("quiet", processes), delivery=QUIET_DELIVERY
        )
        _quiet = Executions(pool, executor=ObanExecutor(quiet), history=False)
    try:
        freeze_startup_heap()  # as `statifier-oban worker` does once its queues run
        await serve_until_stdin_closes(oban)
    finally:
        await pool.close()


# --------------------------------------------------------------------------- parent side


class VerificationError(RuntimeError):
    """A round did not do what it claims: its figure would be meaningless."""


@dataclass
class Round:
    """One timed round of one path with one process count."""

    path: str
    processes: int
    jobs: int
    seconds: float
    worker_cpu: float
    server_cpu: float | None
    others_cpu: float
    window: float
    """Wall seconds of the CPU readings (release to the last completion seen)."""

    @property
    def rate(self) -> float:
        """Jobs per second, first fetch to last acknowledgement."""
        return self.jobs / self.seconds

    @property
    def cpu_ms(self) -> float:
        """Worker CPU milliseconds per job."""
        return 1000 * self.worker_cpu / self.jobs

    @property
    def server_ms(self) -> float | None:
        """PostgreSQL CPU milliseconds per job (None: the server is not local)."""
        return None if self.server_cpu is None else 1000 * self.server_cpu / self.jobs

    @property
    def others_cores(self) -> float:
        """The cores other work kept busy meanwhile, on average."""
        return self.others_cpu / self.window


class Bench:
    """The parent process: prepares rounds, releases them, waits, verifies, reports."""

    def __init__(self, url: str, args: argparse.Namespace) -> None:
        self.url, self.args = url, args
        self.pool = AsyncConnectionPool(url, min_size=2, max_size=10, open=False)
        self.client: Oban | None = None
        self.server: ServerCpu | None = None
        self.executions: dict[str, Executions] = {}
        self.tracing = instrument_without_exporter(args.otel)
        self.api = instrument_without_exporter("api")
        self.recording = instrument_without_exporter("sdk")

    async def open(self) -> None:
        """Open the pool, the client-mode Oban and find the server's processes."""
        await self.pool.open(wait=True)
        self.client = Oban(pool=self.pool, name=f"bench_client_{uuid.uuid4().hex[:6]}")
        backend = await self.rows("SELECT pg_backend_pid()")
        self.server = ServerCpu.of_backend(backend[0][0])

    def executions_for(self, path: str, processes: int) -> Executions:
        """The ``Executions`` that creates a stepping path's executions (history off for
        quiet, whose timers name the quiet delivery)."""
        queue = queue_of(path, processes)
        if queue not in self.executions:
            assert self.client is not None  # noqa: S101 - open() ran first (main)
            if path == "quiet":
                config = execution_config(self.client, timers_queue=queue, delivery=QUIET_DELIVERY)
                made = Executions(self.pool, executor=ObanExecutor(config), history=False)
            else:
                config = execution_config(self.client, timers_queue=queue)
                made = Executions(self.pool, executor=ObanExecutor(config))
            self.executions[queue] = made
        return self.executions[queue]

    async def rows(self, query: Any, params: Sequence[Any] = ()) -> list[Any]:
        """Every row of one query."""
        async with self.pool.connection() as conn:
            return list(await (await conn.execute(query, params)).fetchall())

    async def prepare_steps(
        self, path: str, processes: int, jobs: int
    ) -> tuple[list[str], list[int]]:
        """``jobs`` executions of a stepping path, each with its first timer pending; their
        ids and job ids."""
        executions = self.executions_for(path, processes)
        tag = uuid.uuid4().hex[:8]
        ids = [f"bench_{tag}_{i}" for i in range(jobs)]
        semaphore = asyncio.Semaphore(8)

        async def create(execution_id: str) -> None:
            async with semaphore:
                await executions.create(CHART, execution_id=execution_id)

        from statifier import instrumentation  # not at the top: a baseline may predate it

        with instrumentation.installed(self.tracing if path == "traced" else None):
            await asyncio.gather(*(create(execution_id) for execution_id in ids))
        found = await self.rows(
            "SELECT id FROM oban_jobs WHERE queue = %s AND args->>'scope' = ANY(%s)",
            [queue_of(path, processes), ids],
        )
        return ids, [row[0] for row in found]

    async def prepare_jobs(self, path: str, processes: int, jobs: int) -> list[int]:
        """``jobs`` plain oban jobs of the raw or bare path, an hour out; their ids."""
        assert self.client is not None  # noqa: S101 - open() ran first (main)
        worker = RAW_WORKER if path == "raw" else BARE_WORKER
        later = datetime.now(UTC) + timedelta(hours=1)
        tag = uuid.uuid4().hex[:8]
        made = [
            Job(
                worker,
                queue=queue_of(path, processes),
                args={"scope": f"{path}_{tag}_{i}"},
                scheduled_at=later,
            )
            for i in range(jobs)
        ]
        inserted = await self.client.enqueue_many(made)
        return [job.id for job in inserted if job.id is not None]

    async def release(self, job_ids: list[int]) -> None:
        """Make the jobs due now."""
        await self.rows(
            "UPDATE oban_jobs SET scheduled_at = timezone('UTC', now()) WHERE id = ANY(%s)"
            " RETURNING id",
            [job_ids],
        )

    async def finished(self, job_ids: list[int], timeout: float) -> float:
        """Wait until every job is ``completed``; the seconds from the first fetch to the
        last completion (database clock)."""
        deadline = time.monotonic() + timeout
        pause = POLL_FIRST_S
        while time.monotonic() < deadline:
            rows = await self.rows(
                "SELECT count(*) FILTER (WHERE state = 'completed'),"
                " extract(epoch FROM max(completed_at) - min(attempted_at)),"
                " count(*) FILTER (WHERE state IN ('cancelled', 'discarded', 'retryable'))"
                " FROM oban_jobs WHERE id = ANY(%s)",
                [job_ids],
            )
            done, seconds, failed = rows[0]
            if failed:
                # The error says why (a baseline that cannot read the position format the
                # executions were created in, say): the last line of the first such job's.
                last = await self.rows(
                    "SELECT errors -> -1 ->> 'error' FROM oban_jobs WHERE id = ANY(%s)"
                    " AND state IN ('cancelled', 'discarded', 'retryable') ORDER BY id LIMIT 1",
                    [job_ids],
                )
                lines = str(last[0][0] if last else None).strip().splitlines()
                why = lines[-1][:500] if lines else "no error recorded"
                raise VerificationError(f"{failed} job(s) did not complete; the first: {why}")
            if done == len(job_ids):
                return float(seconds)
            await asyncio.sleep(pause)
            pause = min(pause * 2, POLL_MOST_S)
        raise VerificationError(f"the round did not finish within {timeout} s")

    async def round(self, path: str, processes: int, workers: WorkerProcesses) -> Round:
        """Prepare, release and time one round; verify it."""
        jobs = self.args.jobs
        ids: list[str] = []
        if path in STEPPING:
            ids, job_ids = await self.prepare_steps(path, processes, jobs)
        else:
            job_ids = await self.prepare_jobs(path, processes, jobs)
        if len(job_ids) != jobs:
            raise VerificationError(f"{path}: {len(job_ids)} jobs prepared, not {jobs}")
        cpu = workers.cpu_seconds()
        server = self.server.seconds() if self.server is not None else 0.0
        busy = machine_busy()
        began = time.monotonic()
        await self.release(job_ids)
        seconds = await self.finished(job_ids, timeout=60 + jobs / 10)
        worker_cpu = workers.cpu_seconds() - cpu
        server_cpu = self.server.seconds() - server if self.server is not None else None
        others = machine_busy() - busy - worker_cpu - (server_cpu or 0.0)
        window = time.monotonic() - began
        if path in STEPPING:
            await self.verify_steps(ids, entries=0 if path == "quiet" else 2)
        return Round(
            path, processes, jobs, seconds, worker_cpu, server_cpu, max(others, 0.0), window
        )

    async def verify_steps(self, ids: list[str], *, entries: int) -> None:
        """Each execution stepped exactly once, by one key, with ``entries`` history
        entries (its creation and its step, or none)."""
        rows = await self.rows(
            "SELECT count(*) FILTER (WHERE step_count = 2),"
            " (SELECT count(*) FROM statifier_step_keys WHERE execution_id = ANY(%s)),"
            " (SELECT count(*) FROM statifier_history WHERE execution_id = ANY(%s))"
            " FROM statifier_executions WHERE id = ANY(%s)",
            [ids, ids, ids],
        )
        stepped, keys, history = rows[0]
        if (stepped, keys, history) != (len(ids), len(ids), entries * len(ids)):
            raise VerificationError(
                f"{stepped} executions stepped once, {keys} keys, {history} history entries;"
                f" not {len(ids)}, {len(ids)}, {entries * len(ids)}"
            )

    async def history_bytes(self) -> tuple[int, float]:
        """History entries stored, and the table's bytes per entry (with its indexes)."""
        rows = await self.rows(
            "SELECT count(*), pg_total_relation_size('statifier_history') FROM statifier_history"
        )
        count, size = rows[0]
        return count, size / max(count, 1)

    async def in_process(self) -> dict[str, list[float]]:
        """Steps/s (history on, and off; traced through the API, and recorded by the SDK)
        and raw enqueues/s, per round after a warm-up round: the paths take turns slice by
        slice, the order rotating at every slice, so a slow spell falls on every path of
        the round alike and each round's ratios compare like with like."""
        from statifier import instrumentation

        assert self.client is not None  # noqa: S101 - open() ran first (main)
        steps = self.args.steps
        paths = tuple(IN_PROCESS_PATHS)
        rates: dict[str, list[float]] = {path: [] for path in paths}
        later = datetime.now(UTC) + timedelta(hours=1)
        stepping = {
            "step": self.executions_for("ours", 0),
            "quiet": self.executions_for("quiet", 0),
            "api": self.executions_for("ours", 0),
            "sdk": self.executions_for("ours", 0),
        }
        tracings = {"api": self.api, "sdk": self.recording}
        for round_number in range(self.args.repeats + 1):
            ids = {
                "step": (await self.prepare_steps("ours", 0, 10))[0],
                "quiet": (await self.prepare_steps("quiet", 0, 10))[0],
                "api": (await self.prepare_steps("ours", 0, 10))[0],
                "sdk": (await self.prepare_steps("ours", 0, 10))[0],
            }
            spent = dict.fromkeys(paths, 0.0)
            for turn, start in enumerate(range(0, steps, self.args.slice)):
                shift = (round_number + turn) % len(paths)
                for path in paths[shift:] + paths[:shift]:
                    count = min(self.args.slice, steps - start)
                    tracing = tracings.get(path)
                    began = time.perf_counter()
                    for i in range(start, start + count):
                        if path in stepping:
                            execution_id = ids[path][i % 10]
                            with instrumentation.installed(tracing):
                                result = await stepping[path].step(execution_id, Event(name="tick"))
                            if not isinstance(result, Stepped):
                                raise VerificationError(f"a direct step answered {result!r}")
                        else:
                            job = Job(
                                RAW_WORKER,
                                queue="held",
                                args={"scope": f"e{i}"},
                                scheduled_at=later,
                            )
                            await self.client.enqueue(job)
                    spent[path] += time.perf_counter() - began
            if round_number > 0:  # the first round warms up
                for path, seconds in spent.items():
                    rates[path].append(steps / seconds)
        return rates


def baseline_path(directory: str) -> str:
    """``PYTHONPATH`` for worker processes that import the packages of ``directory``."""
    root = Path(directory).resolve()
    found = [root / "packages" / name / "src" for name in PACKAGES]
    missing = [str(path) for path in found if not path.is_dir()]
    if missing:
        raise SystemExit(f"--baseline {directory}: no {', '.join(missing)}")
    return os.pathsep.join(str(path) for path in found)


async def run(args: argparse.Namespace) -> int:
    """The whole benchmark; the exit status."""
    embedded = None if args.database_url else EmbeddedPostgres.start()
    admin = args.database_url or (embedded.url if embedded else "")
    database = f"statifier_bench_exec_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(database))
        )
    url = make_conninfo(admin, dbname=database)
    try:
        await install(url)
        await install_persistence(url)
        bench = Bench(url, args)
        await bench.open()
        try:
            if args.callgrind:
                return await callgrind(bench, args)
            return await report(bench, args)
        finally:
            await bench.pool.close()
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database))
            )
        if embedded is not None:
            embedded.stop()


async def callgrind(bench: Bench, args: argparse.Namespace) -> int:
    """``--callgrind``: one worker process of the ours path (and, with ``--baseline``, one
    of today's) under valgrind's callgrind, counting instructions only while a round runs
    (``callgrind_control``); a warm-up round of each, then ``--repeats`` rounds of
    ``--jobs`` steps, the paths taking turns. A profile for comparing changes, no goal:
    instructions do not move with the machine's load, the timed rounds do."""
    out = Path(tempfile.mkdtemp(prefix="statifier_callgrind_"))
    paths = ["ours", "today"] if args.baseline else ["ours"]
    control_program = shutil.which("callgrind_control") or "callgrind_control"
    workers: dict[str, WorkerProcesses] = {}
    for path in paths:
        workers[path] = WorkerProcesses(
            str(Path(__file__).resolve()),
            bench.url,
            1,
            args.limit,
            extra=["--role", "today" if path == "today" else "current", "--procs", "1"],
            env=profiled_env(path, args),
            node_prefix=f"g{path}_",
            launcher=(
                "valgrind",
                "-q",
                "--tool=callgrind",
                "--instr-atstart=no",
                f"--callgrind-out-file={out}/{path}.%p",
            ),
        )
    print(f"callgrind: {args.jobs} steps a round, queue limit {args.limit}; dumps in {out}")
    found: dict[str, list[float]] = {path: [] for path in paths}
    last: dict[str, Path] = {}
    try:
        for each in workers.values():
            await each.start()
        pids = {path: each.procs[0].pid for path, each in workers.items()}
        for round_number in range(args.repeats + 1):
            for path in paths[round_number % len(paths) :] + paths[: round_number % len(paths)]:
                pid = str(workers[path].procs[0].pid)

                def control(*what: str, pid: str = pid) -> None:
                    # valgrind's own tool, fixed arguments and our worker's pid.
                    command = [control_program, *what, pid]
                    subprocess.run(command, check=True, capture_output=True)  # noqa: S603

                ids, job_ids = await bench.prepare_steps(path, 1, args.jobs)
                if round_number:
                    control("-i", "on")
                await bench.release(job_ids)
                await bench.finished(job_ids, timeout=60 + args.jobs)
                if round_number:
                    control("-i", "off")
                    control("-d")  # written out and zeroed: the next round counts afresh
                    newest = max(out.glob(f"{path}.*"), key=lambda file: file.stat().st_mtime)
                    totals = re.search(r"^totals: (\d+)", newest.read_text(), re.MULTILINE)
                    if totals is None:
                        raise VerificationError(f"{newest} has no totals line")
                    found[path].append(int(totals.group(1)) / args.jobs)
                    last[path] = newest
                    print(f"  round {round_number}, {path}: {found[path][-1]:,.0f} per step")
                await bench.verify_steps(ids, entries=2)
    finally:
        for each in workers.values():
            await each.stop()
    report_callgrind(found, {path: (last[path], pids[path]) for path in paths}, args)
    return 0


def report_callgrind(
    found: dict[str, list[float]], last: dict[str, tuple[Path, int]], args: argparse.Namespace
) -> None:
    """Each path's median instructions per step, ours/today, and with ``--python-names``
    the Python functions of each path's last round (``last``: its dump and worker pid)."""
    for path, rounds in found.items():
        median = statistics.median(rounds)
        print(f"  {path}: median of {len(rounds)} rounds, {median:,.0f} instructions/step")
    if args.baseline:
        ratio = statistics.median(found["ours"]) / statistics.median(found["today"])
        print(f"  ours/today: {ratio:.3f} of the instructions per step")
    if args.python_names:
        for path, (dump, pid) in last.items():
            print_python_costs(path, dump, pid, args)


def profiled_env(path: str, args: argparse.Namespace) -> dict[str, str]:
    """What a profiled worker adds to the environment: today's code for the baseline,
    perf trampolines for ``--python-names``."""
    env = {"PYTHONPATH": baseline_path(args.baseline)} if path == "today" else {}
    if args.python_names:
        env["PYTHONPERFSUPPORT"] = "1"
    return env


def print_python_costs(path: str, dump: Path, pid: int, args: argparse.Namespace) -> None:
    """``--python-names``: the Python functions of ``path``'s last round that cost the
    most instructions per step, with what they called (perf trampolines named)."""
    named = callgrind_names.name_trampolines(dump, callgrind_names.perf_map(pid))
    print(f"  {path}, last round: instructions per step by Python function (inclusive)")
    for count, name in callgrind_names.python_costs(named)[: args.python_names]:
        function, _, file = name.rpartition(":")
        print(f"  {count / args.jobs:>12,.0f}  {function} ({Path(file).name})")


Rounds = dict[tuple[str, int], list[Round]]
"""Every round, by path and process count, in group order."""


async def measure(bench: Bench, args: argparse.Namespace) -> Rounds:
    """Every round: worker processes for each process count (and for today), all up at
    once; a warm-up round of each path, then ``--repeats`` groups of one round each, the
    order rotating from group to group."""
    script = str(Path(__file__).resolve())
    sets: dict[tuple[str, int], WorkerProcesses] = {}
    # Every worker process of the run is up at once: their pools share the server's
    # connections (a refused connection would starve a path, and the pool retries noisily).
    allowed = await bench.rows("SHOW max_connections")
    sets_per_count = 1 + bool(args.baseline) + ("traced" in args.paths)
    everyone = sum(args.processes) * sets_per_count
    pool = str(max(6, (int(allowed[0][0]) - SPARE_CONNECTIONS) // everyone))
    roles = {"current": "c", "today": "t", "traced": "o"}  # role: its nodes' prefix
    for processes in args.processes:
        for role, prefix in roles.items():
            if (role == "today" and not args.baseline) or (
                role == "traced" and "traced" not in args.paths
            ):
                continue
            sets[(role, processes)] = WorkerProcesses(
                script,
                bench.url,
                processes,
                args.today_limit if role == "today" else args.limit,
                extra=[
                    *("--role", role, "--procs", str(processes)),
                    *("--pool", pool, "--otel", args.otel),
                ],
                env={"PYTHONPATH": baseline_path(args.baseline)} if role == "today" else None,
                node_prefix=f"{prefix}{processes}_",
            )
    kinds = [
        (path, processes)
        for processes in args.processes
        for path in args.paths
        if path != "today" or args.baseline
    ]
    try:
        for workers in sets.values():
            await workers.start()

        def workers_of(path: str, processes: int) -> WorkerProcesses:
            role = path if path in ("today", "traced") else "current"
            return sets[(role, processes)]

        for path, processes in kinds:  # warm-up: imports, pools, plans
            await bench.round(path, processes, workers_of(path, processes))
        rounds: Rounds = {kind: [] for kind in kinds}
        for group in range(args.repeats):
            shift = group % len(kinds)
            for path, processes in kinds[shift:] + kinds[:shift]:
                found = await bench.round(path, processes, workers_of(path, processes))
                rounds[(path, processes)].append(found)
                print(
                    f"  group {group + 1}: {path}, {processes} proc: {found.rate:.0f} jobs/s",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        for workers in sets.values():
            await workers.stop()
    return rounds


def ratios(rounds: Rounds, mine: tuple[str, int], peer: tuple[str, int]) -> list[float]:
    """Each group's own rate ratio, ``mine`` over ``peer``."""
    return [a.rate / b.rate for a, b in zip(rounds[mine], rounds[peer], strict=True)]


IN_PROCESS_PATHS = {
    "step": "Executions.step (one transaction, a timer armed)",
    "quiet": "the same with history off",
    "api": "Executions.step traced (API, no SDK)",
    "sdk": "Executions.step recorded (SDK, no exporter)",
    "enqueue": "Oban.enqueue of a bare job (one insert)",
}
"""Section 2's paths, as its table names them."""

IN_PROCESS_RATIOS = (
    ("step", "enqueue", "step/enqueue"),
    ("step", "quiet", "step with history / without"),
    ("sdk", "step", "recorded (SDK)/untraced"),
)
"""Section 2's ratios besides the tracing goal's: (path, peer, label)."""


def figures(values: Sequence[float], spec: str) -> str:
    """Each round's figure, in the order the rounds ran."""
    return " ".join(format(value, spec) for value in values)


def ms(value: float | None) -> str:
    """Milliseconds, or n/a."""
    return "n/a" if value is None else f"{value:.3f}"


def median_or_none(values: Sequence[float | None]) -> float | None:
    """The median of the values, None if any is None or there are none (a path left out
    with ``--paths``)."""
    if not values or any(value is None for value in values):
        return None
    return statistics.median(value for value in values if value is not None)


async def report(bench: Bench, args: argparse.Namespace) -> int:
    """Run both sections and print their tables and verdicts."""
    started = os.getloadavg()[0]
    print(
        f"statifier executions benchmark: {args.jobs} jobs per round, {args.repeats} groups, "
        f"queue limit {args.limit} per worker process"
        + (f" ({args.today_limit} for today)" if args.baseline else "")
        + f"; load average {started:.1f}"
        + (f"; today = {args.baseline}" if args.baseline else "")
        + "\n"
    )
    rounds = await measure(bench, args)
    print("1. fire -> step -> commit\n")
    print(
        "  path, workers   best jobs/s  median jobs/s  worker ms/job  postgres ms/job"
        "  others' cores  all rounds jobs/s"
    )
    for (path, processes), found in rounds.items():
        rates = [r.rate for r in found]
        print(
            f"  {path:>5}, {processes} proc  {max(rates):11.1f}  {statistics.median(rates):13.1f}"
            f"  {statistics.median(r.cpu_ms for r in found):13.3f}"
            f"  {ms(median_or_none([r.server_ms for r in found])):>15}"
            f"  {statistics.median(r.others_cores for r in found):13.2f}  "
            + " ".join(f"{rate:.0f}" for rate in rates)
        )
    print()
    verdicts(rounds, args)
    entries, per_entry = await bench.history_bytes()
    print(
        f"\n  history: {entries} entries stored, {per_entry:.0f} bytes each on disk"
        " (table, TOAST and indexes)"
    )
    in_process = await bench.in_process()
    print(
        "\n2. in-process: Executions.step against Oban.enqueue, traced against untraced"
        f" (median of {args.repeats} rounds; ratios: the median of each round's own)\n"
    )
    print(f"  path                                              {'steps/s':>8}  rounds")
    for path, label in IN_PROCESS_PATHS.items():
        per_round = in_process[path]
        print(f"  {label:48}  {statistics.median(per_round):8.1f}  {figures(per_round, '.0f')}")
    print()
    for mine, peer, label in IN_PROCESS_RATIOS:
        each = [a / b for a, b in zip(in_process[mine], in_process[peer], strict=True)]
        print(f"  {label:48}  {statistics.median(each):8.3f}  {figures(each, '.2f')}")
    each = [a / b for a, b in zip(in_process["api"], in_process["step"], strict=True)]
    kept = statistics.median(each)
    verdict = "PASS" if kept >= TRACED_TARGET else "BELOW"
    print(
        f"  {f'traced/untraced (>= {TRACED_TARGET}, ADR 30)':48}  {kept:8.3f}  "
        f"{figures(each, '.2f')}  {verdict}"
    )
    if args.baseline:
        script = str(Path(__file__).resolve())
        paths = baseline_path(args.baseline)
        lone_steps.report(
            lone_steps.measure(script, bench.url, paths, args.steps, args.repeats), args.steps
        )
    print(f"\nload average at the start: {started:.1f}, at the end: {os.getloadavg()[0]:.1f}")
    return 0


def lone_side(url: str, steps: int) -> None:
    """``--lone-side``: one side's round of section 3, its figures printed (us a step)."""

    def make(pool: AsyncConnectionPool) -> Executions:
        client = Oban(pool=pool, name=f"bench_lone_{uuid.uuid4().hex[:6]}")  # never started
        config = execution_config(client, timers_queue="lone")
        return Executions(pool, executor=ObanExecutor(config))

    found = asyncio.run(lone_steps.run_side(url, steps, make, CHART, process_cpu))
    print(f"{found.wall_us:.1f} {found.cpu_us:.1f} {found.server_us:.1f}")


def verdicts(rounds: Rounds, args: argparse.Namespace) -> None:
    """Every goal's line: its figure, each group's value, PASS or BELOW."""

    def line(goal: str, figure: float, each: Sequence[float], passed: bool, note: str = "") -> None:
        shown = " ".join(f"{value:.2f}" if value < 100 else f"{value:.0f}" for value in each)
        verdict = "PASS" if passed else "BELOW"
        print(f"  {goal:<44} {figure:10.3f}  {shown:<30} {verdict}{note}")

    print(f"  {'goal':<44} {'median':>10}  {'each group':<30} verdict")
    one, two = (("ours", n) for n in (1, 2))
    if one in rounds:
        found = rounds[one]
        rates = [r.rate for r in found]
        median = statistics.median(rates)
        line(
            f"steps/s, 1 worker process (>= {STEPS_TARGET:.0f})",
            median,
            rates,
            median >= STEPS_TARGET,
        )
        cpu = [r.cpu_ms for r in found]
        line(
            f"worker CPU ms per step, 1 worker (<= {CPU_TARGET_MS})",
            statistics.median(cpu),
            cpu,
            statistics.median(cpu) <= CPU_TARGET_MS,
        )
        if statistics.median(cpu) > CPU_TARGET_MS:
            floor(rounds, statistics.median(cpu))
        if median < STEPS_TARGET:
            bound(found)
    if one in rounds and two in rounds:
        scale = ratios(rounds, two, one)
        line(
            f"2 workers / 1 worker, steps/s (>= {SCALE_TARGET})",
            statistics.median(scale),
            scale,
            statistics.median(scale) >= SCALE_TARGET,
        )
        if statistics.median(scale) < SCALE_TARGET:
            bound(rounds[two])
    for processes in args.processes:
        ours = ("ours", processes)
        server = median_or_none([r.server_ms for r in rounds.get(ours, [])])
        if ours in rounds:
            goal = f"PostgreSQL CPU ms per step, {processes} worker(s)"
            print(f"  {goal:<44} {ms(server):>10}  (reported)")
        if ("today", processes) in rounds:
            each = ratios(rounds, ours, ("today", processes))
            goal = f"ours/today, {processes} worker(s) (context: about 5x)"
            shown = " ".join(f"{v:.2f}" for v in each)
            print(f"  {goal:<44} {statistics.median(each):10.3f}  {shown}")
        peer_verdicts(rounds, processes, args.otel, line)


def peer_verdicts(rounds: Rounds, processes: int, otel: str, line: Callable[..., None]) -> None:
    """The verdicts that compare ours with a peer path in the same groups: raw (issue 8),
    quiet (issue 20) and traced (ADR 30), for ``processes`` worker processes."""
    ours = ("ours", processes)
    goals = (
        (ours, ("raw", processes), RAW_TARGET, "issue 8"),
        (ours, ("quiet", processes), HISTORY_TARGET, "issue 20"),
        (("traced", processes), ours, TRACED_TARGET, otel),
    )
    for top, bottom, target, why in goals:
        if top not in rounds or bottom not in rounds:
            continue
        each = ratios(rounds, top, bottom)
        name = f"{top[0]}/{bottom[0]}"
        line(
            f"{name}, {processes} worker(s) (>= {target}, {why})",
            statistics.median(each),
            each,
            statistics.median(each) >= target,
        )


def floor(rounds: Rounds, step_ms: float) -> None:
    """Why the worker CPU per step stays above its target: what oban's own handling of a
    job (fetch, run, acknowledge) costs the same worker, measured by the bare path, and
    what is left for the step itself."""
    bare = rounds.get(("bare", 1))
    if not bare:
        print("      floor: run the bare path too (--paths) to see oban's own cost per job")
        return
    oban_ms = statistics.median(r.cpu_ms for r in bare)
    print(
        f"      floor: a bare oban job (fetch, run, acknowledge; no step) costs {oban_ms:.3f} ms"
        f" worker CPU in the same run, which leaves {CPU_TARGET_MS - oban_ms:.3f} ms of the"
        f" target for the step; the step itself takes {step_ms - oban_ms:.3f} ms"
    )


def bound(found: Sequence[Round]) -> None:
    """Why a rate stays below its target on this machine: the CPU a step takes, what two
    cores would allow at that cost, and what other work took meanwhile."""
    worker = statistics.median(r.cpu_ms for r in found)
    server = median_or_none([r.server_ms for r in found])
    others = statistics.median(r.others_cores for r in found)
    cores = os.cpu_count() or 1
    if server is None:
        print(f"      bound: {worker:.3f} ms worker CPU per step; the server's CPU is not readable")
        return
    ceiling = 1000 * cores / (worker + server)
    left = max(cores - others, 0.0)
    print(
        f"      bound: a step costs {worker:.3f} ms worker + {server:.3f} ms PostgreSQL CPU:"
        f" {cores} idle cores would run at most {ceiling:.0f} steps/s; other work kept"
        f" {others:.2f} of the {cores} cores busy meanwhile, leaving {left:.2f}"
        f" ({1000 * left / (worker + server):.0f} steps/s at that cost)"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--lone-side", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--node", default="w1", help=argparse.SUPPRESS)
    parser.add_argument("--role", default="current", help=argparse.SUPPRESS)
    parser.add_argument("--procs", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--pool", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument(
        "--otel", choices=OTEL_MODES, default="api", help="how the traced path traces (api)"
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: small rounds, 2 groups")
    parser.add_argument("--jobs", type=positive, default=2000, help="jobs per round (default 2000)")
    parser.add_argument("--repeats", type=positive, default=5, help="groups of rounds")
    parser.add_argument(
        "--limit", type=positive, default=50, help="queue limit per worker process (default 50)"
    )
    parser.add_argument(
        "--today-limit", type=positive, default=10, help="the same for today's workers (default 10)"
    )
    parser.add_argument("--processes", default="1,2", help="worker process counts (1,2)")
    parser.add_argument(
        "--paths", default=",".join(ALL_PATHS), help="paths of section 1 (all by default)"
    )
    parser.add_argument("--baseline", default=None, help="a checkout or archive for today")
    parser.add_argument("--steps", type=positive, default=500, help="in-process steps per round")
    parser.add_argument("--slice", type=positive, default=50, help="in-process slice size")
    parser.add_argument("--database-url", default=None, help="server to use (default: embedded)")
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="profile instead: instructions per step of one worker process under callgrind",
    )
    parser.add_argument(
        "--python-names",
        type=int,
        default=0,
        metavar="N",
        help="with --callgrind: the N Python functions costing the most (perf trampolines)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.jobs, args.repeats, args.steps = 300, 2, 150
    args.processes = [int(n) for n in str(args.processes).split(",")]
    args.paths = [path for path in str(args.paths).split(",") if path]
    unknown = set(args.paths) - set(ALL_PATHS)
    if unknown:
        parser.error(f"unknown paths: {', '.join(sorted(unknown))}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark (or, with ``--worker``, one worker process)."""
    args = parse_args(argv)
    try:
        if args.lone_side:
            lone_side(args.url, args.steps)
            return 0
        if args.worker:
            profile_dir = os.environ.get(PROFILE_ENV)
            profiler = cProfile.Profile(time.process_time) if profile_dir else None
            if profiler is not None:
                profiler.enable()
            try:
                asyncio.run(
                    serve(
                        args.url,
                        args.node,
                        args.limit,
                        args.role,
                        args.procs,
                        args.pool,
                        args.otel,
                    ),
                    loop_factory=worker_loop(),
                )
            finally:
                if profiler is not None and profile_dir:
                    profiler.disable()
                    profiler.dump_stats(os.path.join(profile_dir, f"{args.node}.prof"))
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
