"""Fault suite: durable timers under crashes, stops, a database restart and pool exhaustion.

Run from the repository root (see ``bench/README.md``)::

    uv run python bench/faults.py [--quick] [--only sigkill,sigterm,pg_restart,pool]

Four scenarios, each in a fresh database:

``sigkill``
    Two ``statifier-oban worker`` processes (default flags) run a stream of timers; one is
    killed with SIGKILL mid-stream and restarted at once, as a supervisor would.
``sigterm``
    The same, with SIGTERM: the worker stops gracefully and is restarted.
``pg_restart``
    The PostgreSQL server is stopped mid-stream and started again on the same data
    (embedded server only); the workers and the scheduler ride it out.
``pool``
    Live sessions (``Session`` + ``DurableTimers``) re-arm a timer on every tick while the
    pool their store uses is exhausted for a few seconds.

Each prints scheduled / fired / lost / duplicated at the row level (job rows, deliveries)
and at the chart level (what the charts counted), and the recovery time. Goals, with a
verdict each:

1. nothing lost, at either level;
2. duplicates only at the row level, absorbed where the delivery is idempotent (no chart
   counts a timer twice);
3. crash recovery under 30 s with default flags (``sigkill``, ``sigterm``).

The exit status is 1 on a crash or when a scenario could not run; a missed goal prints
MISSED but does not change it (as the other benchmarks). ``--json PATH`` writes the
figures for a test to read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import statifier
from oban import Oban
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg_pool import AsyncConnectionPool
from statifier.core.algorithm import initialize
from statifier.core.effects import SendDelayed
from statifier.core.position import dumps
from statifier.runtime.session import Session
from statifier_oban import Config, DurableTimers, StoreUnavailable, schedule
from statifier_oban.embedded import EmbeddedPostgres
from statifier_oban.schema import install

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import faults_host  # noqa: E402

SCENARIOS = ("sigkill", "sigterm", "pg_restart", "pool")
QUEUE = "faults"
RECOVERY_GOAL_S = 30.0
"""Goal 3: a crashed or stopped worker's timers run again within this many seconds."""

DELIVERY = "faults_host:ChartDelivery"


@dataclass
class Outcome:
    """One scenario's figures."""

    scenario: str
    scheduled: int = 0
    row_fired: int = 0
    row_lost: int = 0
    row_duplicated: int = 0
    chart_fired: int = 0
    chart_lost: int = 0
    chart_duplicated: int = 0
    recovery_s: float | None = None
    notes: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass(frozen=True)
class Sizes:
    """How big a run is (``--quick`` shrinks it)."""

    rate: float
    seconds: float
    scopes: int
    fault_at_s: float
    sessions: int
    tick_ms: int
    exhaust_s: float
    down_s: float


FULL = Sizes(
    rate=40, seconds=10, scopes=20, fault_at_s=4, sessions=40, tick_ms=400, exhaust_s=4, down_s=3
)
QUICK = Sizes(
    rate=20, seconds=4, scopes=10, fault_at_s=1.5, sessions=15, tick_ms=400, exhaust_s=2, down_s=2
)


# -- databases -------------------------------------------------------------------------------


class Databases:
    """Fresh databases on one server, each with the schema and the host's tables."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self.created: list[str] = []

    async def create(self, label: str) -> str:
        """A new database with oban's schema, our indexes and ``faults_host.TABLES``."""
        name = f"statifier_faults_{label}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        self.created.append(name)
        url = make_conninfo(self.admin_url, dbname=name)
        await install(url)
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(faults_host.TABLES)
        return url

    def drop_all(self) -> None:
        """Drop every database created here."""
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            for name in self.created:
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )


# -- worker processes ------------------------------------------------------------------------


class Worker:
    """One ``statifier-oban worker`` process with default flags, running the faults queue."""

    def __init__(self, url: str, node: str) -> None:
        self.node = node
        self.lines: list[str] = []
        command = [sys.executable, "-m", "statifier_oban.cli", "worker", "--database-url", url]
        host = ["--path", str(BENCH_DIR), "--module", "faults_host"]
        self.process = subprocess.Popen(  # noqa: S603 - our interpreter and CLI, fixed arguments
            [*command, "--queue", f"{QUEUE}=10", *host, "--node", node, "--log-level", "WARNING"],
            env={**os.environ, "FAULTS_DATABASE_URL": url},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        self._ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None  # noqa: S101 - started with stdout=PIPE
        for line in self.process.stdout:
            self.lines.append(line.rstrip())
            if "running queues" in line:
                self._ready.set()

    async def ready(self, timeout: float = 30) -> None:
        """Wait until the worker runs its queue."""
        if not await asyncio.to_thread(self._ready.wait, timeout):
            raise RuntimeError(f"worker {self.node} did not start: {self.lines[-5:]}")

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it lingers."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


async def start_workers(url: str, *nodes: str) -> list[Worker]:
    """Start one worker per node name and wait until all run."""
    workers = [Worker(url, node) for node in nodes]
    for worker in workers:
        await worker.ready()
    return workers


# -- the stream of timers --------------------------------------------------------------------


def tick(ordinal: int, delay_ms: int) -> SendDelayed:
    """The ``tick`` a chart counts, as its own delayed send would be."""
    return SendDelayed(
        event="tick",
        target=None,
        type=None,
        data=None,
        send_id=f"tick-{ordinal}",
        delay_ms=delay_ms,
        c_index=0,
        owner=("onentry", 1, 0),
        ordinal=ordinal,
        id_from_author=True,
        caller_context=None,
        macrostep=ordinal,
        microstep=0,
        round=0,
    )


@dataclass
class Stream:
    """What the scheduler stored, and how often the store could not answer."""

    committed: set[tuple[str, int]] = field(default_factory=set)
    store_failures: int = 0


async def run_stream(config: Config, scopes: list[str], sizes: Sizes, stream: Stream) -> None:
    """Schedule ``rate`` timers a second for ``seconds``, due 0.5-2 s out, round robin.

    A schedule the store cannot take is retried until it can (a held step, as a session
    does); a retry after an unknown outcome is deduplicated on (scope, ordinal).
    """
    count = int(sizes.rate * sizes.seconds)
    ordinals = dict.fromkeys(scopes, 0)
    started = time.monotonic()
    for i in range(count):
        await asyncio.sleep(max(0.0, started + i / sizes.rate - time.monotonic()))
        scope = scopes[i % len(scopes)]
        ordinals[scope] += 1
        effect = tick(ordinals[scope], random.randint(500, 2000))  # noqa: S311 - spread of due times, not a secret
        while True:
            try:
                await schedule(config, scope, effect)
                break
            except StoreUnavailable:
                stream.store_failures += 1
                await asyncio.sleep(0.2)
        stream.committed.add((scope, effect.ordinal))


# -- waiting and counting --------------------------------------------------------------------


async def fetch(url: str, query: Any, params: Any = None) -> list[Any]:
    """The rows of one query on a fresh connection (the server may have restarted)."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        return await (await conn.execute(query, params)).fetchall()


async def wait_for(
    check: Callable[[], Awaitable[bool]], timeout: float, interval: float = 0.1
) -> float | None:
    """Seconds until ``check()`` holds, or None after ``timeout`` (errors count as not yet)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            if await check():
                return time.monotonic() - started
        except psycopg.Error:
            pass
        await asyncio.sleep(interval)
    return None


async def all_completed(url: str, ids: list[int]) -> bool:
    """Whether every job of ``ids`` is completed."""
    if not ids:
        return True
    rows = await fetch(
        url, "SELECT count(*) FROM oban_jobs WHERE id = ANY(%s) AND state = 'completed'", [ids]
    )
    return int(rows[0][0]) == len(ids)


async def settled(url: str) -> bool:
    """Whether no timer of the queue is pending or running any more."""
    rows = await fetch(
        url,
        "SELECT count(*) FROM oban_jobs WHERE queue = %s "
        "AND state NOT IN ('completed', 'cancelled', 'discarded')",
        [QUEUE],
    )
    return int(rows[0][0]) == 0


async def count_worker_scenario(url: str, outcome: Outcome, stream: Stream) -> None:
    """Row and chart figures of a worker scenario."""
    states = dict(
        await fetch(
            url, "SELECT state::text, count(*) FROM oban_jobs WHERE queue = %s GROUP BY 1", [QUEUE]
        )
    )
    raw, distinct = (
        await fetch(url, "SELECT count(*), count(DISTINCT (scope, ordinal)) FROM fault_raw")
    )[0]
    applied = {tuple(row) for row in await fetch(url, "SELECT scope, ordinal FROM fault_applied")}
    chart_fired = (await fetch(url, "SELECT coalesce(sum(fired), 0) FROM fault_charts"))[0][0]
    outcome.scheduled = len(stream.committed)
    outcome.row_fired = int(states.get("completed", 0))
    outcome.row_lost = outcome.scheduled - outcome.row_fired
    outcome.row_duplicated = int(raw) - int(distinct)
    outcome.chart_fired = int(chart_fired)
    outcome.chart_lost = len(stream.committed - applied)
    outcome.chart_duplicated = outcome.chart_fired - len(applied)
    others = {state: n for state, n in states.items() if state != "completed"}
    if others:
        outcome.notes.append(f"rows not completed: {others}")
    if stream.store_failures:
        failures = stream.store_failures
        outcome.notes.append(f"schedule attempts the store could not answer: {failures}")


# -- worker scenarios ------------------------------------------------------------------------


Fault = Callable[[str, list[Worker], Outcome], Awaitable[tuple[float, list[int]]]]
"""Injects the fault; returns (when the fault ended, the job ids to watch for recovery)."""


async def worker_scenario(databases: Databases, name: str, sizes: Sizes, fault: Fault) -> Outcome:
    """Run the stream on two workers, inject ``fault`` mid-stream, drain, count."""
    outcome = Outcome(name)
    url = await databases.create(name)
    scopes = [f"{name}_{n:02d}" for n in range(sizes.scopes)]
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for scope in scopes:
            state, _ = initialize(faults_host.CHART, session_id=scope)
            await conn.execute(
                "INSERT INTO fault_charts (scope, position) VALUES (%s, %s)", [scope, dumps(state)]
            )
    pool = AsyncConnectionPool(url, open=False, min_size=1, max_size=4, timeout=2)
    await pool.open()
    client = Oban(pool=pool, name=f"faults_{name}")
    config = Config(oban=client, timers_queue=QUEUE, delivery=DELIVERY)
    workers = await start_workers(url, f"{name}-a", f"{name}-b")
    stream = Stream()
    try:
        scheduling = asyncio.create_task(run_stream(config, scopes, sizes, stream))
        await asyncio.sleep(sizes.fault_at_s)
        fault_end, watched = await fault(url, workers, outcome)
        if await wait_for(lambda: all_completed(url, watched), timeout=90) is None:
            outcome.notes.append("the watched timers did not complete within 90 s")
        else:
            outcome.recovery_s = round(time.monotonic() - fault_end, 2)
        await scheduling
        if await wait_for(lambda: settled(url), timeout=90) is None:
            outcome.notes.append("the queue did not settle within 90 s")
        await asyncio.sleep(0.5)  # the last acks
        await count_worker_scenario(url, outcome, stream)
    finally:
        for worker in workers:
            worker.stop()
        await pool.close()
    return outcome


async def held_by(url: str, node: str) -> list[int]:
    """Jobs executing on ``node`` now."""
    rows = await fetch(
        url,
        "SELECT id FROM oban_jobs WHERE state = 'executing' AND attempted_by[1] = %s",
        [node],
    )
    return [int(row[0]) for row in rows]


async def until_held(url: str, node: str, wanted: int = 2) -> list[int]:
    """Wait (up to 5 s) until ``node`` holds ``wanted`` jobs, so the fault strands some."""
    deadline = time.monotonic() + 5
    while True:
        held = await held_by(url, node)
        if len(held) >= wanted or time.monotonic() > deadline:
            return held
        await asyncio.sleep(0.005)


async def sigkill(url: str, workers: list[Worker], outcome: Outcome) -> tuple[float, list[int]]:
    """Kill worker a, restart it; watch the jobs it held."""
    victim = workers[0]
    await until_held(url, victim.node)
    victim.process.kill()
    killed = time.monotonic()
    victim.process.wait()
    held = await held_by(url, victim.node)
    outcome.notes.append(f"jobs executing on the killed worker: {len(held)}")
    workers.append(Worker(url, f"{victim.node}2"))
    await workers[-1].ready()
    return killed, held


async def sigterm(url: str, workers: list[Worker], outcome: Outcome) -> tuple[float, list[int]]:
    """Stop worker a with SIGTERM, restart it; watch the jobs it held at the signal."""
    victim = workers[0]
    held = await until_held(url, victim.node)
    victim.process.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    await asyncio.to_thread(victim.process.wait, 60)
    outcome.notes.append(
        f"jobs executing at the signal: {len(held)}; the stop took "
        f"{time.monotonic() - signalled:.1f} s"
    )
    put_back = [line for line in victim.lines if "put back" in line]
    if put_back:
        outcome.notes.append(put_back[-1].split(": ", 1)[-1])
    workers.append(Worker(url, f"{victim.node}2"))
    await workers[-1].ready()
    return signalled, held


def pg_restart(server: EmbeddedPostgres, down_s: float) -> Fault:
    """Restart the embedded server; watch every timer due before it came back."""

    async def inject(url: str, workers: list[Worker], outcome: Outcome) -> tuple[float, list[int]]:
        await asyncio.to_thread(server.restart, down_s)
        back = time.monotonic()
        rows = await fetch(
            url,
            "SELECT id FROM oban_jobs WHERE queue = %s AND scheduled_at <= timezone('UTC', now())",
            [QUEUE],
        )
        outcome.notes.append(f"server down {down_s:g} s; timers due by then: {len(rows)}")
        return back, [int(row[0]) for row in rows]

    return inject


# -- live sessions under pool exhaustion -----------------------------------------------------


def ticker(tick_ms: int) -> Any:
    """A chart that re-arms a ``tick`` on every tick and records each tick's number."""
    return statifier.compile(
        f"""<scxml xmlns="http://www.w3.org/2005/07/scxml" name="fault_ticker">
          <datamodel><data id="seen" expr="[]"/><data id="n" expr="0"/></datamodel>
          <state id="ticking">
            <onentry>
              <assign location="n" expr="n + 1"/>
              <send id="tick" event="tick" delay="{tick_ms}ms"><param name="n" expr="n"/></send>
            </onentry>
            <onexit><cancel sendid="tick"/></onexit>
            <transition event="tick" target="ticking">
              <assign location="seen" expr="seen + [_event.data['n']]"/>
            </transition>
            <transition event="halt" target="halted"/>
          </state>
          <state id="halted"/>
        </scxml>"""
    )


class LogCount(logging.Handler):
    """Counts the session log records by level (the held steps log, loudly, by design)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: dict[str, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        """Count one record."""
        self.counts[record.levelname] = self.counts.get(record.levelname, 0) + 1


async def pool_scenario(databases: Databases, sizes: Sizes) -> Outcome:
    """Live sessions tick through an exhausted store pool; count rows and ticks."""
    outcome = Outcome("pool")
    session_log = logging.getLogger("statifier.runtime.session")
    counter = LogCount()
    session_log.addHandler(counter)
    session_log.propagate = False
    try:
        await _pool_scenario(databases, sizes, outcome)
    finally:
        session_log.removeHandler(counter)
        session_log.propagate = True
    outcome.notes.append(f"session log lines: {counter.counts or 'none'}")
    return outcome


async def _pool_scenario(databases: Databases, sizes: Sizes, outcome: Outcome) -> None:
    url = await databases.create("pool")
    queue_pool = AsyncConnectionPool(url, open=False, min_size=2, max_size=8)
    store_pool = AsyncConnectionPool(url, open=False, min_size=3, max_size=3, timeout=0.5)
    await queue_pool.open(wait=True)
    await store_pool.open(wait=True)
    server = Oban(pool=queue_pool, name="faults_pool_server", queues={"faults_live": 10})
    client = Oban(pool=store_pool, name="faults_pool_client")
    config = Config(oban=client, timers_queue="faults_live")
    chart = ticker(sizes.tick_ms)
    sessions: list[Session] = []
    await server.start()
    try:
        for _ in range(sizes.sessions):
            sessions.append(await Session.start(chart, delayed_sends=DurableTimers(config)))
        await asyncio.sleep(sizes.fault_at_s)
        held = [await store_pool.getconn() for _ in range(3)]
        await asyncio.sleep(sizes.exhaust_s)
        during = [s.status() for s in sessions]
        for conn in held:
            await store_pool.putconn(conn)
        released = time.monotonic()
        at_release = [len(s.snapshot().datamodel["seen"]) for s in sessions]
        outcome.notes.append(
            f"steps held during the exhaustion: {sum(1 for s in during if s.store_error)}; "
            f"in-process timers: {sum(s.pending_timers for s in during)}"
        )

        async def all_ticked_again() -> bool:
            return all(
                len(s.snapshot().datamodel["seen"]) > n
                for s, n in zip(sessions, at_release, strict=True)
            )

        recovery = await wait_for(all_ticked_again, timeout=60, interval=0.05)
        outcome.recovery_s = None if recovery is None else round(time.monotonic() - released, 2)
        if recovery is None:
            outcome.notes.append("some sessions never ticked again")
        await asyncio.sleep(1.0)
        for session in sessions:
            session.send_event("halt")
        await wait_for(lambda: _all_halted(sessions), timeout=30)
        await asyncio.sleep(sizes.tick_ms / 1000 + 0.5)
        await count_pool_scenario(url, outcome, sessions)
    finally:
        for session in sessions:
            await session.stop()
        await server.stop()
        await queue_pool.close()
        await store_pool.close()


async def _all_halted(sessions: list[Session]) -> bool:
    return all(s.status().configuration == ("halted",) for s in sessions)


async def count_pool_scenario(url: str, outcome: Outcome, sessions: list[Session]) -> None:
    """Rows per state against the tick numbers each chart recorded.

    Each chart's chain has one timer pending at a time; the one armed by its last tick is
    still in flight when the chart halts, and the chart's own ``<cancel>`` either cancels
    its row or (if the job was already running) the halted chart ignores it. Those are
    reported apart; every earlier timer must have been delivered and counted.
    """
    rows = await fetch(
        url,
        "SELECT args->>'scope', state::text, args->'data'->>'json' FROM oban_jobs "
        "WHERE queue = 'faults_live'",
    )
    seen_by = {s.session_id: list(s.snapshot().datamodel["seen"]) for s in sessions}
    last = {scope: max(numbers, default=0) for scope, numbers in seen_by.items()}
    delivered: set[tuple[str, int]] = set()
    lost = in_flight = 0
    for scope, state, data in rows:
        number = int(json.loads(data)["n"])
        if number > last.get(scope, 0):
            in_flight += 1
        elif state == "completed":
            delivered.add((scope, number))
        else:
            lost += 1
    seen = [(scope, n) for scope, numbers in seen_by.items() for n in numbers]
    outcome.scheduled = len(rows)
    outcome.row_fired = sum(1 for _, state, _ in rows if state == "completed")
    outcome.row_lost = lost
    outcome.row_duplicated = 0  # one worker in this process: no rescue, no redelivery
    outcome.chart_fired = len(seen)
    outcome.chart_lost = len(delivered - set(seen))
    outcome.chart_duplicated = len(seen) - len(set(seen))
    outcome.notes.append(f"timers in flight when the charts halted (not counted): {in_flight}")
    without_row = set(seen) - delivered
    if without_row:
        outcome.notes.append(f"ticks the charts got without a job row: {len(without_row)}")
        outcome.chart_lost += len(without_row)  # not durable: a restart would have lost them


# -- report ----------------------------------------------------------------------------------


COLUMNS = (
    ("scenario", 10),
    ("scheduled", 9),
    ("row fired", 9),
    ("row lost", 8),
    ("row dup", 7),
    ("chart fired", 11),
    ("chart lost", 10),
    ("chart dup", 9),
    ("recovery s", 10),
)


def report(outcomes: list[Outcome]) -> list[tuple[str, str]]:
    """Print the table, the notes and one verdict per goal; return the verdicts."""
    print()
    print("  ".join(name.rjust(width) for name, width in COLUMNS))
    print("  ".join("-" * width for _, width in COLUMNS))
    for o in outcomes:
        if o.error:
            print(f"{o.scenario:>10}  error: {o.error}")
            continue
        recovery = "-" if o.recovery_s is None else f"{o.recovery_s:.1f}"
        values = (
            o.scenario, o.scheduled, o.row_fired, o.row_lost, o.row_duplicated,
            o.chart_fired, o.chart_lost, o.chart_duplicated, recovery,
        )  # fmt: skip
        print("  ".join(str(v).rjust(w) for v, (_, w) in zip(values, COLUMNS, strict=True)))
    print()
    for o in outcomes:
        for note in o.notes:
            print(f"  {o.scenario}: {note}")
    ran = [o for o in outcomes if o.error is None]
    crashes = [o for o in ran if o.scenario in ("sigkill", "sigterm")]
    verdicts = [
        (
            "nothing lost (row and chart level)",
            _verdict(bool(ran) and all(o.row_lost == o.chart_lost == 0 for o in ran)),
        ),
        (
            "duplicates only at the row level (no chart counts a timer twice)",
            _verdict(bool(ran) and all(o.chart_duplicated == 0 for o in ran)),
        ),
        (
            f"crash recovery under {RECOVERY_GOAL_S:g} s with default flags",
            "not run"
            if not crashes
            else _verdict(
                all(o.recovery_s is not None and o.recovery_s < RECOVERY_GOAL_S for o in crashes)
            ),
        ),
    ]
    print()
    for goal, verdict in verdicts:
        print(f"  {verdict:8} {goal}")
    return verdicts


def _verdict(met: bool) -> str:
    return "MET" if met else "MISSED"


# -- main ------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> int:
    """Run the chosen scenarios on an embedded server (or ``--database-url``)."""
    sizes = QUICK if args.quick else FULL
    chosen = [name for name in args.only.split(",") if name]
    unknown = set(chosen) - set(SCENARIOS)
    if unknown:
        print(f"unknown scenarios: {sorted(unknown)}", file=sys.stderr)
        return 2
    server = None if args.database_url else EmbeddedPostgres.start()
    admin_url = args.database_url or (server.url if server else "")
    databases = Databases(admin_url)
    outcomes: list[Outcome] = []
    started = time.monotonic()
    size = "quick" if args.quick else "full"
    print(f"fault suite: {', '.join(chosen)} ({size}), load {os.getloadavg()[0]:.1f}")
    try:
        for name in chosen:
            print(f"running {name} ...", flush=True)
            try:
                if name == "sigkill":
                    outcome = await worker_scenario(databases, name, sizes, sigkill)
                elif name == "sigterm":
                    outcome = await worker_scenario(databases, name, sizes, sigterm)
                elif name == "pg_restart":
                    if server is None:
                        outcomes.append(Outcome(name, error="needs the embedded server"))
                        continue
                    outcome = await worker_scenario(
                        databases, name, sizes, pg_restart(server, sizes.down_s)
                    )
                else:
                    outcome = await pool_scenario(databases, sizes)
            except Exception as exc:  # report it and go on with the other scenarios
                outcome = Outcome(name, error=f"{type(exc).__name__}: {exc}")
            outcomes.append(outcome)
        verdicts = report(outcomes)
        print(f"\n  {time.monotonic() - started:.0f} s, load {os.getloadavg()[0]:.1f}")
        if args.json:
            Path(args.json).write_text(
                json.dumps(
                    {"outcomes": [asdict(o) for o in outcomes], "verdicts": verdicts}, indent=2
                )
            )
    finally:
        databases.drop_all()
        if server is not None:
            server.stop()
    return 1 if any(o.error and o.error != "needs the embedded server" for o in outcomes) else 0


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller streams, shorter faults")
    parser.add_argument("--only", default=",".join(SCENARIOS), help="scenarios to run")
    parser.add_argument("--database-url", default=None, help="a server to use (no pg_restart)")
    parser.add_argument("--json", default=None, help="write the figures to this file")
    return asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
