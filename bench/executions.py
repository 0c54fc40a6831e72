"""Durable-execution benchmark: a fired timer stepping an execution, against raw oban jobs.

Run from the repository root::

    uv run python bench/executions.py [--quick] [--database-url CONNINFO]

Goals: **a step with its timer costs no more than 2x a bare oban job round trip**
(issue 8), i.e. fire -> step -> commit throughput >= 0.5x raw oban job execution, with 1
and with 2 worker processes; **history costs at most 15%** (issue 20): steps that
write their history entry run at >= 0.85x the throughput of steps with history off; and
**tracing on, with no exporter, keeps at least 90% of the throughput** (issue 22, ADR 30):
fire -> step -> commit with ``statifier_oban.otel`` instrumented, against the same path
untraced. ``--otel api`` (the default) instruments through the OpenTelemetry API with no
SDK configured, what ``instrument()`` costs an application that exports nothing; ``--otel
sdk`` through the SDK's tracer and meter providers with no span processor and no metric
reader (every span and metric recorded, nothing leaves). Section 2 measures both.

1. **fire -> step -> commit** (the goal). ``--jobs`` executions each hold one pending timer;
   one ``UPDATE`` makes them all due. Worker processes (this file run with ``--worker``:
   what ``statifier-oban worker`` runs for executions) fire each through ``TimerWorker``
   and ``ExecutionDelivery`` into ``Executions.step``: lock the row, load the position,
   drive ``tick``, arm the next timer (a job insert), store, record the job's key, commit;
   then oban acknowledges the job, and the step writes its history entry (ADR 25).
   **quiet**: the same, with history off (its own queue, whose delivery steps into an
   ``Executions(history=False)``): the peer of the history goal. **raw**, the peer of
   the first goal: the same number of bare oban job
   round trips, each job arming its successor as a step does (its ``process`` enqueues
   the next job, an hour out, and returns), made due by the same ``UPDATE``, run and
   acknowledged by the same processes. **traced** (the tracing goal): ``ours`` served by a
   second set of worker processes (``--traced MODE``) that trace as ``--otel`` says, on a
   queue of their own, its executions created by a traced parent (with the SDK, each job
   then carries a trace context to continue); both sets run throughout, one idle while
   the other works. **bare** (context): jobs that arm nothing. Rate =
   jobs / (last ``completed_at`` - release), both on the database clock. One round per
   path in each group, the order rotating, ``--repeats`` groups per process count after
   one untimed warm-up round of each; the verdict reads the median of the groups' own
   ours/raw ratios (a shared machine drifts 2x within minutes; two rounds seconds apart
   see the same machine); the history verdict reads the median of ours/quiet likewise.
   Worker CPU per job (``/proc``) is reported as well, and the history table's size per
   entry at the end.
2. **in-process steps** (context, no target): ``Executions.step`` called directly (one
   transaction each, a timer armed by each step), against ``Oban.enqueue`` of a bare job
   on a pooled connection (one insert transaction): the cost of a step's transaction in
   units of the cheapest oban write; and the same steps with history off (one step's own
   cost of its history entry, without the queue around it), and traced (through the API
   alone, and recorded by the SDK, no exporter either way). Interleaved in slices, order
   rotating, best of ``--repeats`` rounds.

The embedded PostgreSQL server is used unless ``--database-url`` names a server; one
database is created there and dropped at the end. Exit status 1 only on a crash or a
failed verification (every execution stepped exactly once, every job completed); a missed
target prints BELOW.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import statistics
import sys
import time
import traceback
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import statifier
from oban import Job, Oban
from oban.worker import register_worker, worker_name
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg_pool import AsyncConnectionPool
from statifier import instrumentation
from statifier.core.effects import SendDelayed
from statifier.core.events import Event
from statifier_oban import register_plugin
from statifier_oban.embedded import EmbeddedPostgres
from statifier_oban.executions import ExecutionDelivery, ObanExecutor, execution_config, use
from statifier_oban.schema import install
from statifier_persistence import Executions, Stepped, StepResult
from statifier_persistence import install as install_persistence
from worker_processes import WorkerProcesses, serve_until_stdin_closes

TARGET = 0.5
"""Ours/raw jobs per second must be at least this (a step with its timer <= 2x a raw job)."""

HISTORY_TARGET = 0.85
"""Ours/quiet jobs per second must be at least this (history costs at most 15%)."""

TRACED_TARGET = 0.9
"""Traced/ours (and traced/untraced in-process steps) must be at least this (ADR 30)."""

PROFILE_ENV = "STATIFIER_BENCH_WORKER_PROFILE"
"""Environment variable naming a directory: worker processes run under cProfile and
write ``<node>.prof`` there when they stop."""

OURS_QUEUE = "timers"
QUIET_QUEUE = "quiet"
TRACED_QUEUE = "traced_timers"
RAW_QUEUE = "raw"

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

# --------------------------------------------------------------------------- worker side


_oban: Oban | None = None
"""The worker process's Oban instance (set by :func:`serve`)."""


class RawTick:
    """The raw peer's worker: a bare job round trip that, like a step, arms its successor
    (one ``Oban.enqueue`` of the next job, an hour out) and returns."""

    async def process(self, job: Job) -> None:
        """Enqueue the successor, scheduled an hour out."""
        assert _oban is not None  # noqa: S101 - serve() sets it before the queue runs
        later = datetime.now(UTC) + timedelta(hours=1)
        await _oban.enqueue(
            Job(RAW_WORKER, queue=RAW_QUEUE, args={"scope": job.args["scope"]}, scheduled_at=later)
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

PATHS = ("ours", "quiet", "traced", "raw", "bare")
"""The paths of section 1: ours against raw (the first goal), against quiet (the history
goal) and traced against ours (the tracing goal); bare for context."""

OTEL_MODES = ("api", "sdk")
"""How a traced path is instrumented: the API with no SDK configured, or the SDK's
providers with no processor and no reader."""


def instrument_without_exporter(mode: str) -> Any:
    """``statifier_oban.otel`` that exports nothing (``mode``: see ``OTEL_MODES``); returns
    the instrumentation (install and uninstall it with ``statifier.instrumentation``)."""
    from statifier_oban.otel import OpenTelemetry

    if mode == "api":
        return OpenTelemetry()  # the global providers: the API's, no SDK set in this process
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider

    return OpenTelemetry(TracerProvider(), MeterProvider())


async def serve(url: str, node: str, limit: int, traced: str | None) -> None:
    """Worker mode: run the queues, deliver timers into executions, until stdin closes
    (``traced``: only the traced queue, instrumented as that mode says)."""
    import statifier_oban.workers  # noqa: F401  (registers TimerWorker)

    if traced:
        node = f"traced_{node}"  # its own oban node beside the untraced worker of that number
    pool = AsyncConnectionPool(url, min_size=4, max_size=limit + 6, open=False)
    await pool.open(wait=True)
    global _oban, _quiet
    queues: dict[str, int | dict[str, Any]] = (
        {TRACED_QUEUE: limit}
        if traced
        else {OURS_QUEUE: limit, QUIET_QUEUE: limit, RAW_QUEUE: limit}
    )
    oban = _oban = Oban(pool=pool, name=f"bench_{node}", node=node, queues=queues)
    timers = TRACED_QUEUE if traced else OURS_QUEUE
    use(Executions(pool, executor=ObanExecutor(execution_config(oban, timers_queue=timers))))
    quiet = execution_config(oban, timers_queue=QUIET_QUEUE, delivery=QUIET_DELIVERY)
    _quiet = Executions(pool, executor=ObanExecutor(quiet), history=False)
    if traced:
        instrumentation.install(instrument_without_exporter(traced))
    try:
        await serve_until_stdin_closes(oban)
    finally:
        await pool.close()


# --------------------------------------------------------------------------- parent side


class VerificationError(RuntimeError):
    """A round did not do what it claims: its figure would be meaningless."""


@dataclass
class Round:
    """One timed round of one path."""

    path: str
    jobs: int
    seconds: float
    worker_cpu: float

    @property
    def rate(self) -> float:
        """Jobs per second, release to last acknowledgement."""
        return self.jobs / self.seconds

    @property
    def cpu_ms(self) -> float:
        """Worker CPU milliseconds per job."""
        return 1000 * self.worker_cpu / self.jobs


class Bench:
    """The parent process: prepares rounds, releases them, waits, verifies, reports."""

    def __init__(self, url: str, args: argparse.Namespace) -> None:
        self.url, self.args = url, args
        self.pool = AsyncConnectionPool(url, min_size=2, max_size=10, open=False)
        self.client: Oban | None = None
        self.executions: Executions | None = None
        self.quiet: Executions | None = None
        self.traced: Executions | None = None
        self.tracing: Any = None
        self.api: Any = None
        self.recording: Any = None

    async def open(self) -> None:
        """Open the pool, build the client-mode Oban and the ``Executions`` that create
        (the quiet one with history off, its timers on the quiet queue)."""
        await self.pool.open(wait=True)
        self.client = Oban(pool=self.pool, name=f"bench_client_{uuid.uuid4().hex[:6]}")
        config = execution_config(self.client, timers_queue=OURS_QUEUE)
        self.executions = Executions(self.pool, executor=ObanExecutor(config))
        quiet = execution_config(self.client, timers_queue=QUIET_QUEUE, delivery=QUIET_DELIVERY)
        self.quiet = Executions(self.pool, executor=ObanExecutor(quiet), history=False)
        traced = execution_config(self.client, timers_queue=TRACED_QUEUE)
        self.traced = Executions(self.pool, executor=ObanExecutor(traced))
        self.tracing = instrument_without_exporter(self.args.otel)
        self.api = instrument_without_exporter("api")
        self.recording = instrument_without_exporter("sdk")

    async def rows(self, query: Any, params: Sequence[Any] = ()) -> list[Any]:
        """Every row of one query."""
        async with self.pool.connection() as conn:
            return list(await (await conn.execute(query, params)).fetchall())

    async def prepare_ours(
        self, jobs: int, *, quiet: bool = False, traced: bool = False
    ) -> tuple[list[str], list[int]]:
        """``jobs`` executions, each with its first timer pending; their ids and job ids
        (``quiet``: with history off, timers on the quiet queue; ``traced``: on the traced
        queue, created while traced)."""
        executions = self.quiet if quiet else self.traced if traced else self.executions
        queue = QUIET_QUEUE if quiet else TRACED_QUEUE if traced else OURS_QUEUE
        assert executions is not None  # noqa: S101 - open() ran first (main)
        tag = uuid.uuid4().hex[:8]
        ids = [f"bench_{tag}_{i}" for i in range(jobs)]
        semaphore = asyncio.Semaphore(8)

        async def create(execution_id: str) -> None:
            async with semaphore:
                await executions.create(CHART, execution_id=execution_id)

        with instrumentation.installed(self.tracing if traced else None):
            await asyncio.gather(*(create(execution_id) for execution_id in ids))
        found = await self.rows(
            "SELECT id FROM oban_jobs WHERE queue = %s AND args->>'scope' = ANY(%s)",
            [queue, ids],
        )
        return ids, [row[0] for row in found]

    async def prepare_jobs(self, worker: str, jobs: int) -> list[int]:
        """``jobs`` plain oban jobs of ``worker``, scheduled an hour out; their ids."""
        assert self.client is not None  # noqa: S101 - open() ran first (main)
        later = datetime.now(UTC) + timedelta(hours=1)
        tag = uuid.uuid4().hex[:8]
        made = [
            Job(worker, queue=RAW_QUEUE, args={"scope": f"raw_{tag}_{i}"}, scheduled_at=later)
            for i in range(jobs)
        ]
        inserted = await self.client.enqueue_many(made)
        return [job.id for job in inserted if job.id is not None]

    async def release(self, job_ids: list[int]) -> datetime:
        """Make the jobs due now; the database time of the release."""
        rows = await self.rows(
            "UPDATE oban_jobs SET scheduled_at = timezone('UTC', now()) WHERE id = ANY(%s)"
            " RETURNING timezone('UTC', now())",
            [job_ids],
        )
        released: datetime = rows[0][0]
        return released

    async def finished(self, job_ids: list[int], timeout: float) -> datetime:
        """Wait until every job is ``completed``; the last ``completed_at``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rows = await self.rows(
                "SELECT count(*) FILTER (WHERE state = 'completed'), max(completed_at),"
                " count(*) FILTER (WHERE state IN ('cancelled', 'discarded', 'retryable'))"
                " FROM oban_jobs WHERE id = ANY(%s)",
                [job_ids],
            )
            done, last, failed = rows[0]
            last_completed: datetime = last
            if failed:
                raise VerificationError(f"{failed} job(s) did not complete")
            if done == len(job_ids):
                return last_completed
            await asyncio.sleep(0.02)
        raise VerificationError(f"the round did not finish within {timeout} s")

    async def round(self, path: str, workers: WorkerProcesses, traced: WorkerProcesses) -> Round:
        """Prepare, release and time one round of ``path``; verify it."""
        jobs = self.args.jobs
        ids: list[str] = []
        if path in ("ours", "quiet", "traced"):
            ids, job_ids = await self.prepare_ours(
                jobs, quiet=path == "quiet", traced=path == "traced"
            )
        else:
            job_ids = await self.prepare_jobs(RAW_WORKER if path == "raw" else BARE_WORKER, jobs)
        if len(job_ids) != jobs:
            raise VerificationError(f"{path}: {len(job_ids)} jobs prepared, not {jobs}")
        serving = traced if path == "traced" else workers
        cpu = serving.cpu_seconds()
        released = await self.release(job_ids)
        last = await self.finished(job_ids, timeout=60 + jobs / 10)
        worker_cpu = serving.cpu_seconds() - cpu
        if path in ("ours", "quiet", "traced"):
            await self.verify_steps(ids, entries=0 if path == "quiet" else 2)
        return Round(path, jobs, (last - released).total_seconds(), worker_cpu)

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

    async def in_process(self) -> dict[str, float]:
        """Steps/s (history on, and off; traced through the API, and recorded by the SDK)
        against raw enqueues/s, interleaved slices, best of the rounds."""
        assert self.executions is not None  # noqa: S101 - open() ran first (main)
        assert self.quiet is not None  # noqa: S101 - open() ran first (main)
        assert self.client is not None  # noqa: S101 - open() ran first (main)
        steps = self.args.steps
        paths = ("step", "quiet", "api", "sdk", "enqueue")
        best = dict.fromkeys(paths, float("inf"))
        later = datetime.now(UTC) + timedelta(hours=1)
        stepping = {
            "step": self.executions,
            "quiet": self.quiet,
            "api": self.executions,
            "sdk": self.executions,
        }
        tracings = {"api": self.api, "sdk": self.recording}
        for round_number in range(self.args.repeats + 1):
            ids = {
                "step": (await self.prepare_ours(10))[0],
                "quiet": (await self.prepare_ours(10, quiet=True))[0],
                "api": (await self.prepare_ours(10))[0],
                "sdk": (await self.prepare_ours(10))[0],
            }
            spent = dict.fromkeys(paths, 0.0)
            shift = round_number % len(paths)
            order = paths[shift:] + paths[:shift]
            for start in range(0, steps, self.args.slice):
                for path in order:
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
                for path in spent:
                    best[path] = min(best[path], spent[path])
        return {path: steps / seconds for path, seconds in best.items()}


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


async def report(bench: Bench, args: argparse.Namespace) -> int:
    """Run both sections and print their tables and verdicts."""
    print(
        f"statifier executions benchmark: {args.jobs} jobs per round, {args.repeats} rounds "
        f"per path, queue limit {args.limit}; load average {os.getloadavg()[0]:.1f}\n"
    )
    table: list[str] = []
    verdicts: list[str] = []
    history_verdicts: list[str] = []
    traced_verdicts: list[str] = []
    for processes in args.processes:
        rounds = await measure(bench, args, processes)
        traced_verdicts.append(traced_line(processes, rounds))
        for path in PATHS:
            rates = [r.rate for r in rounds[path]]
            cpu = statistics.median(r.cpu_ms for r in rounds[path])
            table.append(
                f"  {path:>6}, {processes} proc {max(rates):9.1f}"
                f"  {statistics.median(rates):13.1f}  {cpu:17.2f}   "
                + " ".join(f"{rate:.0f}" for rate in rates)
            )
        verdicts.append(verdict_line(processes, rounds))
        history_verdicts.append(history_line(processes, rounds))
    print("1. fire -> step -> commit (ours) against raw oban job round trips (raw)\n")
    print("  path,  workers best jobs/s  median jobs/s  worker CPU ms/job   all rounds jobs/s")
    print("\n".join(table))
    print(
        "\n  workers       ours/raw (median)  each round            raw/ours CPU"
        "  ours/bare (context)  verdict"
    )
    print("\n".join(verdicts))
    print(
        f"\n  goal: a step with its timer costs at most 2x a raw job round trip "
        f"(ours/raw >= {TARGET})"
    )
    print("\n  workers       ours/quiet (median)  each round            verdict")
    print("\n".join(history_verdicts))
    entries, per_entry = await bench.history_bytes()
    print(
        f"\n  goal: history costs at most 15% (steps with history / steps without >= "
        f"{HISTORY_TARGET})\n  history: {entries} entries stored, {per_entry:.0f} bytes "
        "each on disk (table, TOAST and indexes)"
    )
    print("\n  workers       traced/ours (median)  each round            verdict")
    print("\n".join(traced_verdicts))
    print(
        f"\n  goal: tracing on ({args.otel}, no exporter) keeps at least {TRACED_TARGET:.0%} "
        f"of the throughput (traced/ours >= {TRACED_TARGET})"
    )

    in_process = await bench.in_process()
    print("\n2. in-process (context, no target): Executions.step against Oban.enqueue\n")
    print(f"  Executions.step (one transaction, a timer armed)  {in_process['step']:8.1f} steps/s")
    print(f"  the same with history off                         {in_process['quiet']:8.1f} steps/s")
    enqueues = in_process["enqueue"]
    print(f"  Oban.enqueue of a bare job (one insert)           {enqueues:8.1f} jobs/s")
    ratio = in_process["step"] / in_process["enqueue"]
    print(f"  step/enqueue                                      {ratio:8.3f}")
    history = in_process["step"] / in_process["quiet"]
    print(f"  step with history / without                       {history:8.3f}")
    api, sdk = in_process["api"], in_process["sdk"]
    print(f"  Executions.step traced (API, no SDK)              {api:8.1f} steps/s")
    print(f"  Executions.step recorded (SDK, no exporter)       {sdk:8.1f} steps/s")
    kept = api / in_process["step"]
    verdict = "PASS" if kept >= TRACED_TARGET else "BELOW"
    print(f"  traced/untraced (the goal)                        {kept:8.3f}  {verdict}")
    print(f"  recorded/untraced (context)                       {sdk / in_process['step']:8.3f}")
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    return 0


async def measure(bench: Bench, args: argparse.Namespace, processes: int) -> dict[str, list[Round]]:
    """Every path's rounds with ``processes`` workers: a warm-up round of each, then
    ``--repeats`` groups of one round per path, the order rotating from group to group."""
    script = str(Path(__file__).resolve())
    workers = WorkerProcesses(script, bench.url, processes, args.limit)
    traced = WorkerProcesses(
        script, bench.url, processes, args.limit, extra=["--traced", args.otel]
    )
    await workers.start()
    try:
        await traced.start()
        for path in PATHS:  # warm-up: imports, pools, plans
            await bench.round(path, workers, traced)
        rounds: dict[str, list[Round]] = {path: [] for path in PATHS}
        for group in range(args.repeats):
            shift = group % len(PATHS)
            for path in PATHS[shift:] + PATHS[:shift]:
                rounds[path].append(await bench.round(path, workers, traced))
    finally:
        await workers.stop()
        await traced.stop()
    return rounds


def traced_line(processes: int, rounds: dict[str, list[Round]]) -> str:
    """The tracing goal's figures with ``processes`` workers: each group's traced/ours."""
    return ratio_line(processes, rounds["traced"], rounds["ours"], TRACED_TARGET, 20)


def verdict_line(processes: int, rounds: dict[str, list[Round]]) -> str:
    """The goal's figures with ``processes`` workers: each group's own ours/raw ratio."""
    ratios = [o.rate / r.rate for o, r in zip(rounds["ours"], rounds["raw"], strict=True)]
    bare = [o.rate / b.rate for o, b in zip(rounds["ours"], rounds["bare"], strict=True)]
    median = statistics.median(ratios)
    cpu = statistics.median(r.cpu_ms for r in rounds["raw"]) / statistics.median(
        r.cpu_ms for r in rounds["ours"]
    )
    label = f"{processes} worker{'s' if processes > 1 else ''}"
    verdict = "PASS" if median >= TARGET else "BELOW"
    each = " ".join(f"{ratio:.2f}" for ratio in ratios)
    return (
        f"  {label:<12} {median:18.3f}  {each:<20}  {cpu:12.3f}"
        f"  {statistics.median(bare):19.3f}  {verdict}"
    )


def history_line(processes: int, rounds: dict[str, list[Round]]) -> str:
    """The history goal's figures with ``processes`` workers: each group's ours/quiet."""
    return ratio_line(processes, rounds["ours"], rounds["quiet"], HISTORY_TARGET, 19)


def ratio_line(
    processes: int, top: list[Round], bottom: list[Round], target: float, width: int
) -> str:
    """A goal's line: the median of each group's own top/bottom rate ratio, every ratio,
    and the verdict against ``target``."""
    ratios = [t.rate / b.rate for t, b in zip(top, bottom, strict=True)]
    median = statistics.median(ratios)
    label = f"{processes} worker{'s' if processes > 1 else ''}"
    verdict = "PASS" if median >= target else "BELOW"
    each = " ".join(f"{ratio:.2f}" for ratio in ratios)
    return f"  {label:<12} {median:{width}.3f}  {each:<20}  {verdict}"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--traced", choices=OTEL_MODES, default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--otel", choices=OTEL_MODES, default="api", help="how section 1 traces (api)"
    )
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--node", default="w1", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="smoke run: small rounds, 2 groups")
    parser.add_argument("--jobs", type=int, default=400, help="jobs per round (default 400)")
    parser.add_argument("--repeats", type=int, default=5, help="groups per process count")
    parser.add_argument("--limit", type=int, default=10, help="queue limit per worker process")
    parser.add_argument("--processes", default="1,2", help="worker process counts (1,2)")
    parser.add_argument("--steps", type=int, default=500, help="in-process steps per round")
    parser.add_argument("--slice", type=int, default=50, help="in-process slice size")
    parser.add_argument("--database-url", default=None, help="server to use (default: embedded)")
    args = parser.parse_args(argv)
    if args.quick:
        args.jobs, args.repeats, args.steps = 150, 2, 150
    args.processes = [int(n) for n in str(args.processes).split(",")]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark (or, with ``--worker``, one worker process)."""
    args = parse_args(argv)
    try:
        if args.worker:
            profile_dir = os.environ.get(PROFILE_ENV)
            profiler = cProfile.Profile() if profile_dir else None
            if profiler is not None:
                profiler.enable()
            try:
                asyncio.run(serve(args.url, args.node, args.limit, args.traced))
            finally:
                if profiler is not None and profile_dir:
                    profiler.disable()
                    name = f"traced_{args.node}" if args.traced else args.node
                    profiler.dump_stats(os.path.join(profile_dir, f"{name}.prof"))
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
