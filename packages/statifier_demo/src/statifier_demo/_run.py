"""``statifier-oban demo``: card authorizations as durable executions, served by workers that
get killed and deployed, each hold applied exactly once.

The card-authorization chart shipped in this package runs as durable executions
(``statifier_persistence``) in an embedded PostgreSQL (or ``--database-url``), its 7-day
hold scaled down to ``--hold`` (3 s by default). This process is the host: it creates the
cards and captures one; the timers are served by plain ``statifier-oban worker`` processes
given one module of ours (``--module statifier_demo._delivery``: ``DemoDelivery``, named on
the hold jobs, only records and logs each delivery). The story:

1. workers ``w1`` (it leads oban's cluster duties) and ``w2`` run the queues;
2. card A is authorized and captured at once: its hold job is cancelled; card D is
   authorized with a short hold on a queue only ``w2`` runs;
3. D's hold fires on ``w2``, whose step commits, and ``w2`` is killed (SIGKILL) before oban
   acknowledges the job; a replacement ``w3`` starts; once ``w2``'s heartbeat has been
   silent for the rescue bound, a worker hands the stranded job out again, and the second
   delivery finds its step key applied: D expired once;
4. cards B and C are authorized, then both workers are deployed: ``w1`` and ``w3`` stop,
   B's hold falls due while no worker runs at all, and two new workers (``w4``, ``w5``)
   fire B's and C's holds;
5. the timeline, the job rows, the deliveries and the executions are read back and every
   claim is checked (exit status 1 if anything went otherwise).

``--fault no-capture`` leaves card A uncaptured, to show the checks catch it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import click
import psycopg
import statifier
from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier.cli import kit
from statifier.core.events import Event
from statifier_oban.embedded import EmbeddedPostgres
from statifier_oban.executions import ObanExecutor, execution_config, pending_jobs
from statifier_oban.schema import describe, install
from statifier_persistence import Execution, Executions, Stepped

from ._chart import declared_hold, default_chart_path, hold_ms, load_machine, seed
from ._delivery import CREATE_DELIVERIES, MIDFLIGHT_QUEUE, DemoDelivery
from ._errors import ChartNotFound, StepFailed
from ._store import Stored, TimerRow, read_stored
from ._timeline import Timeline, epoch, table
from ._web import check_web, serve_console
from ._workers import Worker, Workers

DEFAULT_HOLD = "3s"
"""The hold unit unless ``--hold`` says otherwise (the chart: 7d)."""

FAULTS = ("none", "no-capture")
"""Failures ``--fault`` can inject."""

BASE_BUDGET_S = 75.0
"""The longest a run with the default hold may take; a longer hold adds its excess, x4."""

TIMERS = "timers=5"
MIDFLIGHT = f"{MIDFLIGHT_QUEUE}=1"


@dataclass(frozen=True, slots=True)
class DemoOptions:
    """What ``statifier-oban demo`` was asked to do."""

    hold: str = DEFAULT_HOLD
    """The hold unit (a duration such as ``3s``): card A holds one, D half, B one plus
    1.5 s, C two plus 1.5 s."""
    database_url: str | None = None
    """A real server to use instead of the embedded one (None: embedded)."""
    chart: Path | None = None
    """The card-authorization chart (None: the one shipped in this package)."""
    fault: str = "none"
    """A failure to inject (see :data:`FAULTS`)."""
    web: bool = False
    """Once the demo ends, serve its executions in the web console until stopped."""


@dataclass(frozen=True, slots=True)
class Cards:
    """The four cards' execution ids."""

    a: str
    b: str
    c: str
    d: str

    def all(self) -> list[str]:
        """Every id, A to D."""
        return [self.a, self.b, self.c, self.d]


@dataclass(slots=True)
class Outcome:
    """What the run left behind, read back from PostgreSQL and the processes."""

    stored: Stored
    executions: dict[str, Execution]
    workers: dict[str, Worker]
    deploy_stopped: datetime | None = None
    deploy_up: datetime | None = None
    pids: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Check:
    """One verified claim about the run."""

    ok: bool
    claim: str
    found: str = ""


# -- command line -----------------------------------------------------------------------------


class HoldType(click.ParamType[str, Any]):
    """A hold unit: a duration ``hold_ms`` reads (``3s``, ``1500ms``)."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        """The duration as given (a usage error if it is not one)."""
        try:
            hold_ms(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        return str(value)


@click.command(
    cls=kit.Command,
    help="Card authorizations as durable executions: a worker killed mid-flight and a "
    "deploy of every worker, each hold applied exactly once.",
)
@click.option(
    "--hold", default=DEFAULT_HOLD, type=HoldType(), metavar="DURATION",
    help=f"the hold unit, e.g. 3s or 1500ms (default: {DEFAULT_HOLD}; the chart says 7d)",
)  # fmt: skip
@click.option(
    "--database-url", metavar="URL", default=None, envvar="DATABASE_URL", show_envvar=True,
    help="use this PostgreSQL instead of an embedded one (the schema is installed; "
    "card ids get a run id so reruns do not collide)",
)  # fmt: skip
@click.option(
    "--chart", type=click.Path(path_type=Path), default=None, metavar="PATH",
    help="the card-authorization chart (default: the one shipped with statifier_demo)",
)  # fmt: skip
@click.option(
    "--fault", type=click.Choice(FAULTS), default="none", show_default=True,
    help="inject a failure to see the checks catch it: no-capture (card A is never "
    "captured, so its hold expires it)",
)  # fmt: skip
@click.option(
    "--web", is_flag=True,
    help="once the demo ends, serve its executions in the web console (loopback, a "
    "fresh token printed) until Ctrl-C",
)  # fmt: skip
def demo(hold: str, database_url: str | None, chart: Path | None, fault: str, web: bool) -> int:
    """Run the demo with its options; return the exit status."""
    if web:
        check_web()
    options = DemoOptions(hold=hold, database_url=database_url, chart=chart, fault=fault, web=web)
    return run_demo(options)


def main(argv: Sequence[str] | None = None, *, prog: str = "python -m statifier_demo") -> int:
    """Run the demo (``statifier-demo``, ``python -m statifier_demo``); return its status.

    ``argv`` defaults to ``sys.argv[1:]``; ``prog`` names the command in usage and help.
    Usage errors are status 2, as with every statifier command (``statifier.cli.kit``).
    """
    return kit.run(demo, argv, prog=prog)


# -- the run ----------------------------------------------------------------------------------


def run_demo(options: DemoOptions, out: TextIO | None = None) -> int:
    """Run the whole demo (see the module docstring) and return its exit status (0; a
    chart that cannot be read or a check that fails is a ``CommandError``)."""
    t0 = time.time()
    timeline = Timeline(t0, out)
    try:
        chart = options.chart if options.chart is not None else default_chart_path()
        machine = load_machine(chart)
        declared = declared_hold(chart.read_text(encoding="utf-8"))
    except (ChartNotFound, OSError, ValueError, statifier.ChartError) as exc:
        raise kit.CommandError(exc) from None
    run_id = f"_{uuid.uuid4().hex[:8]}" if options.database_url else ""
    cards = Cards(*(f"card_{letter}{run_id}" for letter in "abcd"))
    for line in _intro(chart, options.hold, declared, cards):
        timeline.print(line)
    embedded: EmbeddedPostgres | None = None
    outcome: Outcome | None = None
    workers: Workers | None = None
    restore = _stop_on_sigterm()
    try:
        if options.database_url is None:
            timeline.note("database", "starting an embedded PostgreSQL (own data directory)")
            embedded = EmbeddedPostgres.start()
            url = embedded.url
        else:
            url = options.database_url
        asyncio.run(_install(url))
        timeline.note("database", f"{describe(url)}: oban's schema and the execution tables")
        workers = Workers(url, timeline, run_id)
        outcome = asyncio.run(_story(url, machine, cards, options, timeline, workers))
    except Exception as exc:
        timeline.note("error", f"{type(exc).__name__}: {' '.join(str(exc).split())}")
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (see _stop_on_sigterm)
        name = exc.signal if isinstance(exc, _Terminated) else "SIGINT"
        timeline.note("stopped", f"{name} received: stopping the workers")
    finally:
        try:
            if workers is not None:
                workers.close()
            if embedded is not None and not (options.web and outcome is not None):
                _stop(embedded, timeline)
                embedded = None
        finally:
            restore()
    try:
        elapsed = time.time() - t0
        if outcome is not None:
            _summary(timeline, outcome, cards)
        checks = verify(outcome, cards, options.hold, elapsed)
        status = _report(timeline, checks, elapsed)
        if options.web and outcome is not None:
            serve_console(url, timeline)
        return status
    finally:
        if embedded is not None:  # kept for the console
            _stop(embedded, timeline)


def _stop(embedded: EmbeddedPostgres, timeline: Timeline) -> None:
    embedded.stop()
    timeline.note("database", "embedded PostgreSQL stopped, its data directory removed")


class _Terminated(KeyboardInterrupt):
    """A stop signal other than SIGINT, raised where the run is, as Ctrl-C is."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal = signal_name


def _stop_on_sigterm() -> Callable[[], None]:
    """Make SIGTERM stop the run as Ctrl-C does, so the workers and the embedded server
    are stopped on the way out (by default SIGTERM ends the process, leaving them
    running); returns what puts the previous handler back. A no-op off the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def interrupt(signum: int, _frame: object) -> None:
        raise _Terminated(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, interrupt)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    return restore


def _intro(chart: Path, hold: str, declared: str, cards: Cards) -> list[str]:
    return [
        f"statifier-oban demo: {chart.name} as durable executions, a {hold} hold unit "
        f"(the chart says {declared})",
        f"  card A ({cards.a}) is captured at once: its hold job is cancelled",
        f"  card D ({cards.d})'s hold fires on worker w2, which is killed mid-flight;",
        "    the job is delivered again by another worker and applied once",
        f"  cards B ({cards.b}) and C ({cards.c}) hold across a deploy of every worker;",
        "    B's hold falls due while no worker runs at all",
        "",
    ]


async def _install(url: str) -> None:
    await install(url)  # oban's schema, our indexes and (with persistence) the executions
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(CREATE_DELIVERIES)


async def _story(
    url: str,
    machine: statifier.Machine,
    cards: Cards,
    options: DemoOptions,
    timeline: Timeline,
    workers: Workers,
) -> Outcome:
    unit = hold_ms(options.hold) / 1000
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(url, open=False, min_size=1, max_size=4)
    await pool.open(wait=True)
    client = Oban(pool=pool, name=f"statifier-demo-host-{os.getpid()}")  # enqueues, runs none
    try:
        host = Host(pool, client, machine, timeline)
        w1 = workers.start("w1", TIMERS)
        await asyncio.to_thread(workers.wait_up, w1)
        await _until(lambda: host.leader_is(w1.node), 30, "w1 leading")
        timeline.note("leader", "w1 leads; every worker rescues the jobs of workers that died")
        w2 = workers.start("w2", TIMERS, MIDFLIGHT)
        await asyncio.to_thread(workers.wait_up, w2)

        await host.authorize(cards.a, unit)
        if options.fault != "no-capture":
            await host.step(cards.a, "capture.requested", "hold job cancelled by the exit")
            await host.step(cards.a, "capture.succeeded", "settled")
        await host.authorize(cards.d, unit / 2, queue=MIDFLIGHT_QUEUE)

        await _until(lambda: _stalled(timeline, cards.d), unit / 2 + 30, "D's hold mid-flight")
        await asyncio.to_thread(workers.kill, w2)
        timeline.note("mid-flight", f"{cards.d}'s step committed; its job is still executing")
        w3 = workers.start("w3", TIMERS, MIDFLIGHT)
        await asyncio.to_thread(workers.wait_up, w3)
        await _until(lambda: host.job_finished(cards.d), 60, "D's job rescued and completed")

        await host.authorize(cards.b, unit + 1.5)
        await host.authorize(cards.c, 2 * unit + 1.5)
        timeline.note("deploy", "deploying every worker: w1 and w3 stop gracefully")
        await asyncio.to_thread(workers.stop, w1, w3)
        stopped = await host.now()
        timeline.note("deploy", "no worker runs; the hold jobs wait in PostgreSQL")
        due = await host.due_at(cards.b)
        await _until(lambda: host.past(due), unit + 30, "B's hold falling due")
        timeline.note("due", f"{cards.b}'s hold is due, and no worker is running")
        w4, w5 = workers.start("w4", TIMERS), workers.start("w5", TIMERS)
        await asyncio.to_thread(workers.wait_up, w4, w5)
        up = await host.now()
        for card in (cards.b, cards.c):
            await _until(host.finishing(card), 2 * unit + 60, f"{card} done")
        await asyncio.to_thread(workers.stop, w4, w5)

        return Outcome(
            stored=await read_stored(pool, cards.all()),
            executions={card: await host.executions.get(card) for card in cards.all()},
            workers=dict(workers.all),
            deploy_stopped=stopped,
            deploy_up=up,
            pids={worker.pid: label for label, worker in workers.all.items()},
        )
    finally:
        await pool.close()


class Host:
    """The demo's host: creates and steps the cards, and reads what it needs to wait on."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        client: Oban,
        machine: statifier.Machine,
        timeline: Timeline,
    ) -> None:
        self.pool = pool
        self.client = client
        self.machine = machine
        self.timeline = timeline
        self.executions = self._executions("timers")
        self._midflight = self._executions(MIDFLIGHT_QUEUE)

    def _executions(self, queue: str) -> Executions:
        config = execution_config(self.client, timers_queue=queue, delivery=DemoDelivery)
        return Executions(self.pool, executor=ObanExecutor(config))

    async def authorize(self, card: str, hold_s: float, *, queue: str = "timers") -> None:
        """Create the card's execution with a hold of ``hold_s``; note its hold job."""
        executions = self._midflight if queue == MIDFLIGHT_QUEUE else self.executions
        hold = f"{round(hold_s * 1000)}ms"
        await executions.create(self.machine, execution_id=card, datamodel=seed(hold))
        jobs = await pending_jobs(self.client, card)
        shown = ", ".join(f"job {job.job_id} on {queue}" for job in jobs) or "no job"
        self.timeline.note("armed", f"{card}: authorized, hold {hold_s:g} s ({shown})")

    async def step(self, card: str, event: str, what: str) -> None:
        """Step ``event`` into the card (the host's own step); note it."""
        result = await self.executions.step(card, Event(name=event))
        if not isinstance(result, Stepped):
            raise StepFailed(f"{event} into {card} answered {result!r}")
        self.timeline.note("step", f"{card}: {event} -> {what}")

    async def _one(self, query: Any, params: Sequence[Any] = ()) -> Any:
        async with self.pool.connection() as conn:
            row = await (await conn.execute(query, params)).fetchone()
        return None if row is None else row[0]

    async def leader_is(self, node: str) -> bool:
        """Whether ``node`` holds oban's leadership."""
        return bool(await self._one("SELECT count(*) FROM oban_leaders WHERE node = %s", [node]))

    async def job_finished(self, card: str) -> bool:
        """Whether the card's hold job is completed."""
        jobs = (await read_stored(self.pool, [card])).jobs
        return bool(jobs) and all(job.state == "completed" for job in jobs)

    async def finished(self, card: str) -> bool:
        """Whether the card's execution is completed."""
        return (await self.executions.get(card)).status == "completed"

    def finishing(self, card: str) -> Callable[[], Awaitable[bool]]:
        """A predicate for :func:`_until`: the card's execution is completed."""
        return lambda: self.finished(card)

    async def now(self) -> datetime:
        """The database clock (UTC, naive, as oban's timestamps)."""
        value: datetime = await self._one("SELECT timezone('UTC', now())")
        return value

    async def due_at(self, card: str) -> datetime:
        """When the card's hold job is due."""
        value: datetime = await self._one(
            "SELECT min(scheduled_at) FROM oban_jobs WHERE args->>'scope' = %s", [card]
        )
        return value

    async def past(self, moment: datetime) -> bool:
        """Whether the database clock has passed ``moment``."""
        return await self.now() > moment


def _stalled(timeline: Timeline, card: str) -> bool:
    return any(e.data.get("execution") == card for e in timeline.of("stalls"))


async def _until(
    predicate: Callable[[], Awaitable[bool] | bool], timeout: float, what: str
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if not isinstance(value, bool):
            value = await value
        if value:
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s")


# -- what it left behind ----------------------------------------------------------------------


def _summary(timeline: Timeline, outcome: Outcome, cards: Cards) -> None:
    stored = outcome.stored
    label = {card: letter for card, letter in zip(cards.all(), "ABCD", strict=True)}
    timeline.print()
    timeline.print("hold jobs (oban_jobs) and their deliveries (times from the demo's start)")
    table(
        ["card", "job", "queue", "state", "due", "attempts", "rescued", "delivered", "applied"],
        [
            [
                label.get(job.scope, job.scope),
                job.id,
                job.queue,
                job.state,
                timeline.rel(job.scheduled_at),
                job.attempt,
                job.rescued,
                _deliveries(stored, job, outcome.pids),
                len(stored.keys_of(job.id)),
            ]
            for job in stored.jobs
        ],
        timeline.print,
    )
    timeline.print()
    timeline.print("executions (statifier_executions)")
    table(
        ["card", "id", "status", "ended in", "steps", "updated"],
        [
            [
                label[card],
                card,
                execution.status,
                _ended(execution),
                execution.step_count,
                timeline.rel(execution.updated_at.timestamp()),
            ]
            for card, execution in outcome.executions.items()
        ],
        timeline.print,
    )


def _deliveries(stored: Stored, job: TimerRow, pids: dict[int, str]) -> str:
    done = stored.deliveries_of(job.id)
    return ", ".join(f"{pids.get(d.pid, d.pid)}: {d.outcome}" for d in done) or "-"


def _ended(execution: Execution | None) -> str:
    if execution is None or execution.outcome is None:
        return "-"
    return " ".join(execution.outcome.get("configuration", ())) or "-"


# -- checks -----------------------------------------------------------------------------------


def verify(outcome: Outcome | None, cards: Cards, hold: str, elapsed: float) -> list[Check]:
    """Every claim the demo makes, checked against the processes and the database."""
    if outcome is None:
        return [Check(False, "the story ran to its end", "it stopped early (see the timeline)")]
    stored = outcome.stored
    checks: list[Check] = []

    def card(letter: str, scope: str, final: str, steps: int) -> None:
        execution = outcome.executions.get(scope)
        found = (
            f"{execution.status}, in {_ended(execution)}, {execution.step_count} steps"
            if (execution is not None)
            else "no execution"
        )
        checks.append(
            Check(
                execution is not None
                and execution.status == "completed"
                and _ended(execution) == final
                and execution.step_count == steps,
                f"card {letter} ({scope}) ended {final}, in {steps} steps",
                found,
            )
        )

    jobs_a = stored.jobs_of(cards.a)
    card("A", cards.a, "settled", 3)
    checks.append(
        Check(
            [job.state for job in jobs_a] == ["cancelled"]
            and not stored.deliveries_of(jobs_a[0].id),
            "card A's hold job was cancelled by the capture and never delivered",
            _jobs(stored, jobs_a, outcome.pids),
        )
    )

    jobs_d = stored.jobs_of(cards.d)
    card("D", cards.d, "expired", 2)
    delivered_d = [
        (outcome.pids.get(d.pid), d.outcome) for j in jobs_d for d in stored.deliveries_of(j.id)
    ]
    checks.append(
        Check(
            len(jobs_d) == 1
            and jobs_d[0].state == "completed"
            and jobs_d[0].rescued >= 1
            and delivered_d == [("w2", "applied"), ("w3", "already applied")]
            and len(stored.keys_of(jobs_d[0].id)) == 1,
            "card D's hold job was delivered twice (w2, killed mid-flight; w3, after the "
            "rescue) and applied once",
            _jobs(stored, jobs_d, outcome.pids),
        )
    )

    for letter, scope in (("B", cards.b), ("C", cards.c)):
        card(letter, scope, "expired", 2)
        jobs = stored.jobs_of(scope)
        delivered = [
            (outcome.pids.get(d.pid), d.outcome) for j in jobs for d in stored.deliveries_of(j.id)
        ]
        checks.append(
            Check(
                len(jobs) == 1
                and jobs[0].state == "completed"
                and len(delivered) == 1
                and delivered[0][0] in ("w4", "w5")
                and delivered[0][1] == "applied"
                and len(stored.keys_of(jobs[0].id)) == 1,
                f"card {letter}'s hold survived the deploy: applied once, by a new worker",
                _jobs(stored, jobs, outcome.pids),
            )
        )
    jobs_b = stored.jobs_of(cards.b)
    stopped, up = epoch(outcome.deploy_stopped), epoch(outcome.deploy_up)
    due_b = epoch(jobs_b[0].scheduled_at) if jobs_b else None
    checks.append(
        Check(
            stopped is not None and up is not None and due_b is not None and stopped < due_b < up,
            "card B's hold fell due while no worker was running",
            f"due {due_b}, workers stopped {stopped}, up again {up}",
        )
    )

    applied = sum(1 for d in stored.deliveries if d.outcome == "applied")
    checks.append(
        Check(
            applied == len(stored.keys) == 3 and len(set(stored.keys)) == len(stored.keys),
            "three holds applied in all, each by one step key: no hold applied twice",
            f"{applied} applied deliveries, {len(stored.keys)} keys",
        )
    )

    exits = {label: worker.code for label, worker in outcome.workers.items()}
    wanted = {"w1": 0, "w2": -9, "w3": 0, "w4": 0, "w5": 0}
    checks.append(
        Check(
            exits == wanted,
            "w2 was killed (SIGKILL); w1, w3, w4 and w5 stopped gracefully (status 0)",
            ", ".join(f"{label} {code}" for label, code in exits.items()),
        )
    )
    budget = BASE_BUDGET_S + 4 * max(0.0, hold_ms(hold) / 1000 - hold_ms(DEFAULT_HOLD) / 1000)
    checks.append(
        Check(
            elapsed < budget,
            f"the whole run took {elapsed:.1f} s (under {budget:.0f} s)",
            f"{elapsed:.1f} s",
        )
    )
    return checks


def _jobs(stored: Stored, jobs: Sequence[TimerRow], pids: dict[int, str]) -> str:
    if not jobs:
        return "no job"
    return "; ".join(
        f"job {job.id} {job.state}, rescued {job.rescued}, delivered "
        f"[{_deliveries(stored, job, pids)}], {len(stored.keys_of(job.id))} key(s)"
        for job in jobs
    )


def _report(timeline: Timeline, checks: list[Check], elapsed: float) -> int:
    timeline.print()
    timeline.print("checks")
    for check in checks:
        found = f"  (found: {check.found})" if check.found and not check.ok else ""
        timeline.print(f"  {'ok  ' if check.ok else 'FAIL'}  {check.claim}{found}")
    failed = [check for check in checks if not check.ok]
    timeline.print()
    if failed:
        timeline.print(f"demo FAILED: {len(failed)} of {len(checks)} checks failed")
        raise kit.CommandError(f"{failed[0].claim} (found: {failed[0].found})")
    timeline.print(f"demo passed: all {len(checks)} checks hold; run time {elapsed:.1f} s")
    return 0
