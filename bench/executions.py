"""Durable-execution benchmark: a fired timer stepping an execution, against raw oban jobs.

Run from the repository root::

    uv run python bench/executions.py [--quick] [--database-url CONNINFO]

Goals: **a step with its timer costs no more than 2x a bare oban job round trip**
(issue 8), i.e. fire -> step -> commit throughput >= 0.5x raw oban job execution, with 1
and with 2 worker processes; and **history costs at most 15%** (issue 20): steps that
write their history entry run at >= 0.85x the throughput of steps with history off.

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
   acknowledged by the same processes. **bare** (context): jobs that arm nothing. Rate =
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
   cost of its history entry, without the queue around it). Interleaved in slices, order
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

PROFILE_ENV = "STATIFIER_BENCH_WORKER_PROFILE"
"""Environment variable naming a directory: worker processes run under cProfile and
write ``<node>.prof`` there when they stop."""

OURS_QUEUE = "timers"
QUIET_QUEUE = "quiet"
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

PATHS = ("ours", "quiet", "raw", "bare")
"""The paths of section 1: ours against raw (the first goal) and against quiet (the
history goal); bare for context."""


async def serve(url: str, node: str, limit: int) -> None:
    """Worker mode: run the queues, deliver timers into executions, until stdin closes."""
    import statifier_oban.workers  # noqa: F401  (registers TimerWorker)

    pool = AsyncConnectionPool(url, min_size=4, max_size=limit + 6, open=False)
    await pool.open(wait=True)
    global _oban, _quiet
    queues: dict[str, int | dict[str, Any]] = {
        OURS_QUEUE: limit,
        QUIET_QUEUE: limit,
        RAW_QUEUE: limit,
    }
    oban = _oban = Oban(pool=pool, name=f"bench_{node}", node=node, queues=queues)
    use(Executions(pool, executor=ObanExecutor(execution_config(oban, timers_queue=OURS_QUEUE))))
    quiet = execution_config(oban, timers_queue=QUIET_QUEUE, delivery=QUIET_DELIVERY)
    _quiet = Executions(pool, executor=ObanExecutor(quiet), history=False)
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

    async def open(self) -> None:
        """Open the pool, build the client-mode Oban and the ``Executions`` that create
        (the quiet one with history off, its timers on the quiet queue)."""
        await self.pool.open(wait=True)
        self.client = Oban(pool=self.pool, name=f"bench_client_{uuid.uuid4().hex[:6]}")
        config = execution_config(self.client, timers_queue=OURS_QUEUE)
        self.executions = Executions(self.pool, executor=ObanExecutor(config))
        quiet = execution_config(self.client, timers_queue=QUIET_QUEUE, delivery=QUIET_DELIVERY)
        self.quiet = Executions(self.pool, executor=ObanExecutor(quiet), history=False)

    async def rows(self, query: Any, params: Sequence[Any] = ()) -> list[Any]:
        """Every row of one query."""
        async with self.pool.connection() as conn:
            return list(await (await conn.execute(query, params)).fetchall())

    async def prepare_ours(self, jobs: int, *, quiet: bool = False) -> tuple[list[str], list[int]]:
        """``jobs`` executions, each with its first timer pending; their ids and job ids
        (``quiet``: with history off, timers on the quiet queue)."""
        executions = self.quiet if quiet else self.executions
        assert executions is not None  # noqa: S101 - open() ran first (main)
        tag = uuid.uuid4().hex[:8]
        ids = [f"bench_{tag}_{i}" for i in range(jobs)]
        semaphore = asyncio.Semaphore(8)

        async def create(execution_id: str) -> None:
            async with semaphore:
                await executions.create(CHART, execution_id=execution_id)

        await asyncio.gather(*(create(execution_id) for execution_id in ids))
        found = await self.rows(
            "SELECT id FROM oban_jobs WHERE queue = %s AND args->>'scope' = ANY(%s)",
            [QUIET_QUEUE if quiet else OURS_QUEUE, ids],
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

    async def round(self, path: str, workers: WorkerProcesses) -> Round:
        """Prepare, release and time one round of ``path``; verify it."""
        jobs = self.args.jobs
        ids: list[str] = []
        if path in ("ours", "quiet"):
            ids, job_ids = await self.prepare_ours(jobs, quiet=path == "quiet")
        else:
            job_ids = await self.prepare_jobs(RAW_WORKER if path == "raw" else BARE_WORKER, jobs)
        if len(job_ids) != jobs:
            raise VerificationError(f"{path}: {len(job_ids)} jobs prepared, not {jobs}")
        cpu = workers.cpu_seconds()
        released = await self.release(job_ids)
        last = await self.finished(job_ids, timeout=60 + jobs / 10)
        worker_cpu = workers.cpu_seconds() - cpu
        if path in ("ours", "quiet"):
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
        """Steps/s (history on, and off) against raw enqueues/s, interleaved slices, best
        of the rounds."""
        assert self.executions is not None  # noqa: S101 - open() ran first (main)
        assert self.quiet is not None  # noqa: S101 - open() ran first (main)
        assert self.client is not None  # noqa: S101 - open() ran first (main)
        steps = self.args.steps
        paths = ("step", "quiet", "enqueue")
        best = dict.fromkeys(paths, float("inf"))
        later = datetime.now(UTC) + timedelta(hours=1)
        stepping = {"step": self.executions, "quiet": self.quiet}
        for round_number in range(self.args.repeats + 1):
            ids = {
                "step": (await self.prepare_ours(10))[0],
                "quiet": (await self.prepare_ours(10, quiet=True))[0],
            }
            spent = dict.fromkeys(paths, 0.0)
            shift = round_number % len(paths)
            order = paths[shift:] + paths[:shift]
            for start in range(0, steps, self.args.slice):
                for path in order:
                    count = min(self.args.slice, steps - start)
                    began = time.perf_counter()
                    for i in range(start, start + count):
                        if path in stepping:
                            execution_id = ids[path][i % 10]
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
    for processes in args.processes:
        rounds = await measure(bench, args, processes)
        for path in PATHS:
            rates = [r.rate for r in rounds[path]]
            cpu = statistics.median(r.cpu_ms for r in rounds[path])
            table.append(
                f"  {path:>5}, {processes} proc  {max(rates):9.1f}"
                f"  {statistics.median(rates):13.1f}  {cpu:17.2f}   "
                + " ".join(f"{rate:.0f}" for rate in rates)
            )
        verdicts.append(verdict_line(processes, rounds))
        history_verdicts.append(history_line(processes, rounds))
    print("1. fire -> step -> commit (ours) against raw oban job round trips (raw)\n")
    print("  path, workers  best jobs/s  median jobs/s  worker CPU ms/job   all rounds jobs/s")
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
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    return 0


async def measure(bench: Bench, args: argparse.Namespace, processes: int) -> dict[str, list[Round]]:
    """Every path's rounds with ``processes`` workers: a warm-up round of each, then
    ``--repeats`` groups of one round per path, the order rotating from group to group."""
    workers = WorkerProcesses(str(Path(__file__).resolve()), bench.url, processes, args.limit)
    await workers.start()
    try:
        for path in PATHS:  # warm-up: imports, pools, plans
            await bench.round(path, workers)
        rounds: dict[str, list[Round]] = {path: [] for path in PATHS}
        for group in range(args.repeats):
            shift = group % len(PATHS)
            for path in PATHS[shift:] + PATHS[:shift]:
                rounds[path].append(await bench.round(path, workers))
    finally:
        await workers.stop()
    return rounds


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
    ratios = [o.rate / q.rate for o, q in zip(rounds["ours"], rounds["quiet"], strict=True)]
    median = statistics.median(ratios)
    label = f"{processes} worker{'s' if processes > 1 else ''}"
    verdict = "PASS" if median >= HISTORY_TARGET else "BELOW"
    each = " ".join(f"{ratio:.2f}" for ratio in ratios)
    return f"  {label:<12} {median:19.3f}  {each:<20}  {verdict}"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
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
                asyncio.run(serve(args.url, args.node, args.limit))
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
