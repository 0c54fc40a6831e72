"""``statifier-oban demo``: a card authorization's hold timer survives a deploy.

Runs the card-authorization chart shipped in this package (its 7-day hold scaled down by
``--hold``, 3 s by default) in live sessions whose delayed sends are oban jobs, and whose positions
are stored after every step. Three processes take part:

* this one: starts an embedded PostgreSQL in a data directory of its own (or uses
  ``--database-url``), runs the two phases below one after the other, prints their
  timeline as it comes, then reads the job rows and stored positions back and checks
  the outcome (exit status 1 if anything went otherwise);
* process 1 (``python -m statifier_demo --phase first``): installs the schema,
  authorizes cards A and B (each arms its hold: one timer job each), captures A before
  its hold is due (which cancels A's job), then "deploys": stops oban and both sessions
  and exits while B's hold is still pending;
* process 2 (``--phase resume``): a fresh interpreter loads B's stored position, resumes
  the session under the same id, runs the timers queue, and B's timer fires into it:
  B reaches ``expired``.

The phase processes get the database conninfo through the environment
(:data:`URL_ENV`), never on the command line, so a password does not show in ``ps``.
``--fault`` injects a failure to show that the checks catch it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import psycopg
import statifier
from statifier.core.position import PositionError, loads
from statifier_oban.embedded import EmbeddedPostgres
from statifier_oban.schema import describe
from statifier_oban.workers import TIMER_WORKER

from ._chart import declared_hold, default_chart_path, hold_ms, load_machine
from ._errors import ChartNotFound
from ._phases import FAULTS, PhaseOptions, run_phase
from ._store import (
    SELECT_POSITIONS,
    SELECT_TIMER_JOBS,
    StoredPosition,
    TimerRow,
)
from ._timeline import Emitter, Entry, Timeline, table

URL_ENV = "STATIFIER_OBAN_DEMO_DATABASE_URL"
"""Environment variable through which the phase processes get the database conninfo."""

DEFAULT_HOLD = "3s"
"""The hold the demo gives each card unless ``--hold`` says otherwise (the chart: 7d)."""

BASE_BUDGET_S = 30.0
"""The longest a run with the default hold may take; a longer hold adds its excess."""

PHASE_TIMEOUT_S = 45.0
"""How long a phase process may run beyond the hold before it is killed."""


@dataclass(frozen=True, slots=True)
class DemoOptions:
    """What ``statifier-oban demo`` was asked to do."""

    hold: str = DEFAULT_HOLD
    """Each card's hold delay (a duration such as ``3s`` or ``500ms``)."""
    database_url: str | None = None
    """A real server to use instead of the embedded one (None: embedded)."""
    chart: Path | None = None
    """The card-authorization chart (None: the one shipped in this package)."""
    fault: str = "none"
    """A failure to inject (see ``_phases.FAULTS``)."""


@dataclass(slots=True)
class Child:
    """A phase process the demo ran: how it ended."""

    label: str
    pid: int
    code: int | None = None
    timed_out: bool = False
    entries: list[Entry] = field(default_factory=list)


@dataclass(slots=True)
class Outcome:
    """What the database says after both phases."""

    positions: dict[str, StoredPosition]
    jobs: list[TimerRow]

    def jobs_of(self, scope: str) -> list[TimerRow]:
        """The timer job rows of ``scope``."""
        return [job for job in self.jobs if job.scope == scope]


@dataclass(frozen=True, slots=True)
class Check:
    """One verified claim about the run."""

    ok: bool
    claim: str
    found: str = ""


# -- command line -----------------------------------------------------------------------------


def _hold_argument(value: str) -> str:
    try:
        hold_ms(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``statifier-oban demo``."""
    parser.add_argument(
        "--hold",
        default=DEFAULT_HOLD,
        type=_hold_argument,
        metavar="DURATION",
        help=f"each card's hold delay, e.g. 3s or 1500ms (default: {DEFAULT_HOLD}; "
        "the chart says 7d)",
    )
    parser.add_argument(
        "--database-url",
        metavar="URL",
        default=None,
        help="use this PostgreSQL instead of an embedded one (the schema is installed; "
        "session ids get a run id so reruns do not collide)",
    )
    parser.add_argument(
        "--chart",
        type=Path,
        default=None,
        metavar="PATH",
        help="the card-authorization chart (default: the one shipped with statifier_demo)",
    )
    parser.add_argument(
        "--fault",
        choices=FAULTS,
        default="none",
        help="inject a failure to see the checks catch it: skip-resume (process 2 runs "
        "the queue without resuming card B) or unknown-session (process 2 is asked to "
        "resume a session with no stored position)",
    )


def run_command(args: argparse.Namespace) -> int:
    """Run the demo with parsed ``add_arguments`` options; return the exit status."""
    options = DemoOptions(
        hold=args.hold, database_url=args.database_url, chart=args.chart, fault=args.fault
    )
    return run_demo(options)


# -- the first process ------------------------------------------------------------------------


def run_demo(options: DemoOptions, out: TextIO | None = None) -> int:
    """Run the whole demo (see the module docstring) and return its exit status."""
    t0 = time.time()
    timeline = Timeline(t0, out)
    try:
        chart = options.chart if options.chart is not None else default_chart_path()
        machine = load_machine(chart)
        declared = declared_hold(chart.read_text(encoding="utf-8"))
    except (ChartNotFound, OSError, ValueError, statifier.ChartError) as exc:
        print(f"statifier-oban demo: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    run_id = uuid.uuid4().hex[:8] if options.database_url else ""
    suffix = f"_{run_id}" if run_id else ""
    card_a, card_b = f"sess_card_a{suffix}", f"sess_card_b{suffix}"
    for line in _story(chart, options.hold, declared, card_a, card_b):
        timeline.print(line)
    embedded: EmbeddedPostgres | None = None
    children: list[Child] = []
    outcome: Outcome | None = None
    try:
        if options.database_url is None:
            timeline.note("database", "starting an embedded PostgreSQL (own data directory)")
            embedded = EmbeddedPostgres.start()
            url = embedded.url
            timeline.note("database", f"embedded PostgreSQL ready: {embedded.data_dir}")
        else:
            url = options.database_url
            timeline.note("database", f"using {describe(url)} (run id {run_id})")
        base = PhaseOptions(
            url=url, t0=t0, hold=options.hold, card_a=card_a, card_b=card_b, chart=chart
        )
        first = _run_child(timeline, "p1", "first", base, PHASE_TIMEOUT_S)
        children.append(first)
        if first.code == 0:
            resumed = card_b + "_unknown" if options.fault == "unknown-session" else card_b
            second = PhaseOptions(
                url=url,
                t0=t0,
                hold=options.hold,
                card_a=card_a,
                card_b=resumed,
                chart=chart,
                fault=options.fault,
            )
            budget = PHASE_TIMEOUT_S + hold_ms(options.hold) / 1000
            children.append(_run_child(timeline, "p2", "resume", second, budget))
        outcome = _read_outcome(url, [card_a, card_b])
    except Exception as exc:
        timeline.note("error", f"{type(exc).__name__}: {' '.join(str(exc).split())}")
    finally:
        if embedded is not None:
            embedded.stop()
            timeline.note("database", "embedded PostgreSQL stopped, its data directory removed")
    elapsed = time.time() - t0
    if outcome is not None:
        _summary(timeline, outcome, machine)
    checks = verify(children, outcome, machine, card_a, card_b, options.hold, elapsed)
    timeline.print()
    timeline.print("checks")
    for check in checks:
        found = f"  (found: {check.found})" if check.found and not check.ok else ""
        timeline.print(f"  {'ok  ' if check.ok else 'FAIL'}  {check.claim}{found}")
    failed = [check for check in checks if not check.ok]
    timeline.print()
    if failed:
        timeline.print(f"demo FAILED: {len(failed)} of {len(checks)} checks failed")
        print(
            f"statifier-oban demo: error: {failed[0].claim} (found: {failed[0].found})",
            file=sys.stderr,
        )
        return 1
    timeline.print(f"demo passed: all {len(checks)} checks hold; run time {elapsed:.1f} s")
    return 0


def _story(chart: Path, hold: str, declared: str, card_a: str, card_b: str) -> list[str]:
    """What the demo is about to show, as the first lines of its output."""
    return [
        f"statifier-oban demo: {chart.name} with a {hold} hold (the chart says {declared})",
        f"  card A ({card_a}) is captured before its hold is due: its timer job is cancelled",
        f"  card B ({card_b}) is not: process 1 deploys (exits) with B's timer pending,",
        "  process 2 resumes B from its stored position, and B's timer fires into it",
        "",
    ]


def _phase_argv(phase: str, options: PhaseOptions) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "statifier_demo",
        "--phase",
        phase,
        "--t0",
        repr(options.t0),
        "--hold",
        options.hold,
        "--card-a",
        options.card_a,
        "--card-b",
        options.card_b,
        "--fault",
        options.fault,
    ]
    if options.chart is not None:
        argv += ["--chart", str(options.chart)]
    return argv


def _run_child(
    timeline: Timeline, label: str, phase: str, options: PhaseOptions, timeout: float
) -> Child:
    """Run one phase process, showing its timeline entries as they come."""
    env = {**os.environ, URL_ENV: options.url, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        _phase_argv(phase, options),
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    child = Child(label=label, pid=process.pid)
    number = label[1:]
    timeline.note(
        "spawn",
        f"process {number} started (pid {process.pid}): python -m statifier_demo --phase {phase}",
        pid=process.pid,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    reader = threading.Thread(target=pump, name=f"demo-{label}", daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            child.timed_out = True
            timeline.note("error", f"process {number} did not finish within {timeout:.0f} s")
            process.kill()
            break
        if line is None:
            break
        entry = Entry.from_json(line)
        if entry is None:
            timeline.raw(label, line)
        else:
            child.entries.append(entry)
            timeline.show(entry)
    child.code = process.wait()
    reader.join(timeout=5)
    timeline.note("exited", f"process {number} (pid {process.pid}) exited with status {child.code}")
    return child


def _read_outcome(url: str, scopes: Sequence[str]) -> Outcome:
    with psycopg.connect(url, autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass('demo_positions') IS NOT NULL").fetchone()
        positions: dict[str, StoredPosition] = {}
        if exists and exists[0]:
            rows = conn.execute(SELECT_POSITIONS, (list(scopes),)).fetchall()
            positions = {row[0]: StoredPosition.from_row(row) for row in rows}
        jobs = [
            TimerRow.from_row(row)
            for row in conn.execute(SELECT_TIMER_JOBS, (TIMER_WORKER, list(scopes))).fetchall()
        ]
    return Outcome(positions=positions, jobs=jobs)


def _summary(timeline: Timeline, outcome: Outcome, machine: statifier.Machine) -> None:
    rel = timeline.rel
    timeline.print()
    timeline.print("timer jobs (oban_jobs; times from the demo's start)")
    table(
        [
            "id",
            "scope",
            "send",
            "state",
            "scheduled_at",
            "attempted_at",
            "finished_at",
            "attempt",
            "attempted by",
        ],
        [
            [
                job.id,
                job.scope,
                job.send_id,
                job.state,
                rel(job.scheduled_at),
                rel(job.attempted_at),
                rel(job.finished_at),
                f"{job.attempt}/{job.max_attempts}",
                job.node or "-",
            ]
            for job in outcome.jobs
        ],
        timeline.print,
    )
    timeline.print()
    timeline.print("stored positions (demo_positions)")
    table(
        ["session_id", "status", "configuration", "macrostep", "bytes", "updated_at"],
        [
            [
                stored.session_id,
                stored.status,
                ", ".join(stored.configuration) or "-",
                stored.macrostep,
                len(stored.position),
                rel(stored.updated_at),
            ]
            for stored in outcome.positions.values()
        ],
        timeline.print,
    )


# -- checks -----------------------------------------------------------------------------------


def verify(
    children: Sequence[Child],
    outcome: Outcome | None,
    machine: statifier.Machine,
    card_a: str,
    card_b: str,
    hold: str,
    elapsed: float,
) -> list[Check]:
    """Every claim the demo makes, checked against the processes and the database."""
    checks: list[Check] = []
    by_label = {child.label: child for child in children}
    first, second = by_label.get("p1"), by_label.get("p2")
    checks.append(_exited(first, "process 1"))
    if outcome is None:
        checks.append(Check(False, "the job rows and positions could be read", "no outcome"))
        return checks

    stored_a = outcome.positions.get(card_a)
    checks.append(_final(stored_a, card_a, "card A", "settled"))
    jobs_a = outcome.jobs_of(card_a)
    checks.append(
        Check(
            len(jobs_a) == 1 and jobs_a[0].state == "cancelled",
            "card A's hold job was cancelled by the capture",
            _jobs(jobs_a),
        )
    )

    deploys = [e for e in (first.entries if first else []) if e.kind == "deploy"]
    deploy = deploys[-1].data if deploys else {}
    due_in = deploy.get("due_in")
    checks.append(
        Check(
            deploy.get("state") == "scheduled" and isinstance(due_in, float) and due_in > 0,
            "the deploy came before card B's hold was due "
            f"(its job still scheduled, due in {_seconds(due_in)} by the database clock)",
            f"state {deploy.get('state')}, due in {_seconds(due_in)}",
        )
    )

    entries_2 = second.entries if second else []
    resumed = [e.data.get("session_id") for e in entries_2 if e.kind == "resumed"]
    stored_b = outcome.positions.get(card_b)
    position_id = _position_session_id(stored_b, machine)
    checks.append(
        Check(
            resumed == [card_b] and position_id == card_b,
            f"process 2 resumed card B under the same session id ({card_b})",
            f"resumed {resumed or 'nothing'}, stored position's id {position_id}",
        )
    )

    jobs_b = outcome.jobs_of(card_b)
    nodes = {e.data.get("node") for e in entries_2 if e.kind == "oban"}
    job_b = jobs_b[0] if len(jobs_b) == 1 else None
    checks.append(
        Check(
            job_b is not None
            and job_b.state == "completed"
            and job_b.attempt == 1
            and job_b.node in nodes,
            "card B's hold job completed exactly once, on attempt 1, in process 2's oban",
            _jobs(jobs_b),
        )
    )

    everything = [e for child in children for e in child.entries]
    fired = [e for e in everything if e.kind == "fired"]
    discarded = [e for e in everything if e.kind == "discarded"]
    where = ", ".join(f"{e.data.get('scope')} in {e.proc}" for e in fired)
    checks.append(
        Check(
            [(e.proc, e.data.get("scope")) for e in fired] == [("p2", card_b)] and not discarded,
            "one timer fired in all: card B's, into the resumed session; nothing discarded",
            f"{len(fired)} fired ({where or 'none'}), {len(discarded)} discarded",
        )
    )
    checks.append(_final(stored_b, card_b, "card B", "expired"))
    checks.append(_exited(second, "process 2"))

    budget = BASE_BUDGET_S + max(0.0, hold_ms(hold) / 1000 - hold_ms(DEFAULT_HOLD) / 1000)
    checks.append(
        Check(
            elapsed < budget,
            f"the whole run took {elapsed:.1f} s (under {budget:.0f} s)",
            f"{elapsed:.1f} s",
        )
    )
    return checks


def _exited(child: Child | None, name: str) -> Check:
    if child is None:
        return Check(False, f"{name} ran and exited with status 0", "it never ran")
    found = "killed after a timeout" if child.timed_out else f"status {child.code}"
    return Check(
        child.code == 0 and not child.timed_out,
        f"{name} (pid {child.pid}) exited with status 0",
        found,
    )


def _final(stored: StoredPosition | None, scope: str, card: str, state: str) -> Check:
    found = (
        f"{stored.status} in {', '.join(stored.configuration) or 'no state'}"
        if stored is not None
        else "no stored position"
    )
    return Check(
        stored is not None and stored.status == "done" and stored.configuration == (state,),
        f"{card} ({scope}) ended {state}, as its stored position says",
        found,
    )


def _position_session_id(stored: StoredPosition | None, machine: statifier.Machine) -> str | None:
    if stored is None:
        return None
    try:
        return loads(stored.position, machine).session_id
    except PositionError as exc:
        return f"<unreadable: {exc}>"


def _jobs(jobs: Sequence[TimerRow]) -> str:
    if not jobs:
        return "no job"
    return "; ".join(f"job {j.id} {j.state}, attempt {j.attempt}, by {j.node or '-'}" for j in jobs)


def _seconds(value: Any) -> str:
    return f"{value:.3f} s" if isinstance(value, float) else "?"


# -- python -m statifier_demo -----------------------------------------------------------------


def _parser(prog: str) -> argparse.ArgumentParser:
    """The demo's options, plus the hidden ones of a phase process (``--phase`` and the
    values the first process hands down; the conninfo comes from :data:`URL_ENV`)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="The card-authorization demo: a hold timer survives a deploy.",
    )
    add_arguments(parser)
    parser.add_argument("--phase", choices=("first", "resume"), help=argparse.SUPPRESS)
    parser.add_argument("--t0", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--card-a", default="sess_card_a", help=argparse.SUPPRESS)
    parser.add_argument("--card-b", default="sess_card_b", help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None, *, prog: str = "python -m statifier_demo") -> int:
    """Run the demo (``statifier-oban demo`` calls this), or with ``--phase`` one phase process.

    ``argv`` defaults to ``sys.argv[1:]``; ``prog`` names the command in usage and help.
    Usage errors exit with status 2 through argparse, as usual.
    """
    args = _parser(prog).parse_args(argv)
    if args.phase is None:
        return run_command(args)
    url = args.database_url or os.environ.get(URL_ENV)
    if not url:
        print(f"demo phase: error: pass --database-url or set ${URL_ENV}", file=sys.stderr)
        return 2
    options = PhaseOptions(
        url=url,
        t0=args.t0 if args.t0 is not None else time.time(),
        hold=args.hold,
        card_a=args.card_a,
        card_b=args.card_b,
        chart=args.chart,
        fault=args.fault,
    )
    out = Emitter("p1" if args.phase == "first" else "p2", options.t0)
    return asyncio.run(run_phase(args.phase, options, out))
