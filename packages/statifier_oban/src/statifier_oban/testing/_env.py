"""``DurableEnv``: real executions on a real database, whose clock the test moves.

The environment owns a client-mode ``Oban`` (no producers), an ``Executions`` on an
``ObanExecutor`` (installed with ``statifier_oban.executions.use``), and runs the due jobs
itself, one at a time, on the path a worker's jobs take: our staging statement, our
fetch, oban's executor running our workers, our ack writer (``_oban_compat.run_job``).
``advance(span)`` moves time by moving the due time of the scheduled jobs earlier, one due
time after the other (``sql/advance_test_clock.sql``), running what falls due at each:
ADR 26.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from oban import Oban
from oban.job import Job
from psycopg_pool import AsyncConnectionPool
from statifier.basichttp import OutboundPolicy
from statifier.chart.durations import format_duration, span_ms
from statifier.core.effects import ErrorRaised
from statifier.core.state import MachineState
from statifier.datamodel.host import HostFunction
from statifier.testing import ChartAssertionError, ErrorWatch
from statifier.testing._checks import ids, subset_problem, unknown_state
from statifier_persistence import Execution, Executions, Limits, Stepped

from .._config import Config
from .._errors import ConfigError
from .._names import (
    CASCADE_WORKER,
    CHILD_START_WORKER,
    INVOKE_WORKER,
    MESSAGE_WORKER,
    POST_WORKER,
    SETTLEMENT_WORKER,
    TIMER_WORKER,
)
from ..executions import ObanExecutor, execution_config, pending_jobs, use
from ..invocations._handler import InvokeHandler
from ..store import _fetch, _oban_compat, _statements
from ..store._latency import stage_due
from ._clock import Clock, Move
from ._report import describe_execution
from ._scripts import ScriptedInvocations

DEFAULT_MAX_JOBS: Final = 10_000
"""The most jobs one ``advance`` or ``settle`` runs before it gives up (a chart that keeps
scheduling timers due at once would otherwise never let it return)."""

STAGE_LIMIT: Final = 1_000
"""Jobs one staging statement makes available."""

STEPS_KEPT: Final = 200
"""Steps the environment remembers for its reports (the newest)."""

DUE_TOLERANCE_MS: Final = 60_000
"""How far ``assert_timer``'s ``due`` may be from a job's due time: the database's clock
runs on while a test runs (and may be another machine's)."""

_WORKER_NAMES: Final = {
    TIMER_WORKER: "timer",
    INVOKE_WORKER: "invocation",
    CHILD_START_WORKER: "child start",
    SETTLEMENT_WORKER: "settlement",
    CASCADE_WORKER: "cascade",
    MESSAGE_WORKER: "message",
    POST_WORKER: "basichttp post",
}

_job_label: contextvars.ContextVar[str] = contextvars.ContextVar(
    "statifier_oban_testing_job", default="by the test"
)


@dataclass(frozen=True, slots=True)
class RanJob:
    """A job the environment ran: its id, kind (``timer``, ``invocation``, ``child
    start``, ``settlement``, ``cascade``, ``message``: one between a parent and a chart
    it invoked, ``basichttp post``: a BasicHTTP send), execution (``scope``: a message's
    receiver), what it carried (``event``/``send_id`` of a timer, ``invoke_id``), the
    attempt, the state its outcome left it in (``completed``, ``retryable``, ``cancelled``,
    ``discarded``, ``scheduled`` for a snooze) or ``held`` (a scripted invocation waiting
    for the test), and the environment's time (``DurableEnv.now_ms``) when it ended or was held."""

    job_id: int
    kind: str
    scope: str | None
    event: str | None
    send_id: str | None
    invoke_id: str | None
    attempt: int
    outcome: str
    at_ms: int


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One committed step of an execution, as the environment saw it: what caused it (a
    job it ran, or ``by the test``), the status and the states after it, the kinds of its
    effects, and the environment's time."""

    execution_id: str
    cause: str
    status: str
    states: tuple[str, ...]
    effects: tuple[str, ...]
    at_ms: int


_active: DurableEnv | None = None


def active_env() -> DurableEnv:
    """The environment open in this process (``LookupError`` if none is)."""
    if _active is None:
        raise LookupError("no statifier_oban.testing environment is open")
    return _active


class _EnvExecutor(ObanExecutor):
    """``ObanExecutor`` whose invoke types include those the test scripts."""

    def __init__(
        self,
        env: DurableEnv,
        handlers: Mapping[str, type[InvokeHandler]] | None,
        basichttp: OutboundPolicy | None,
    ) -> None:
        super().__init__(env.config, handlers=handlers, basichttp=basichttp)
        self._env = env

    @property
    def invoke_types(self) -> frozenset[str]:
        """The real handlers' types and the scripted ones."""
        return super().invoke_types | frozenset(self._env._scripts)

    def handler_for(self, invoke_type: str) -> type[InvokeHandler] | None:
        """A scripted type's handler first, else the real one."""
        script = self._env._scripts.get(invoke_type)
        return script.handler if script is not None else super().handler_for(invoke_type)


class DurableEnv:
    """Durable executions under test, on a clock the test moves (open with :meth:`open`,
    or take the pytest fixture ``durable_env``).

    ``executions`` is a real ``statifier_persistence.Executions``: create executions with
    production charts, step them, read them. ``await advance("7d")`` lets seven days pass:
    every timer, retry and snoozed job due on the way runs, in due order, each through a
    real worker, and whatever it leads to runs too, before ``advance`` returns.
    ``invocations(type)`` scripts the answers of an invoke type. Every ``error.*`` a
    chart raises fails the next ``advance``/``settle`` unless allowed or expected, as in
    ``statifier.testing``. The ``assert_*`` methods raise ``ChartAssertionError`` with a
    report of the execution.

    Time moves in the database only: the due times of the jobs move earlier. The wall
    clock runs on too (a test's own milliseconds count as time passing), so a check that
    something has *not* happened yet keeps a margin larger than the test takes.

    ``basichttp`` is the allow-list of the charts' BasicHTTP sends (none by default: each
    is refused with ``error.communication``); a POST job runs when ``advance`` or
    ``settle`` reaches it, and makes a real request (``statifier.testing.HttpReceiver``
    records them on loopback).
    """

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        *,
        handlers: Mapping[str, type[InvokeHandler]] | None = None,
        timers_queue: str = "timers",
        invoke_queue: str = "invokes",
        allow_errors: Iterable[str] = (),
        max_jobs: int = DEFAULT_MAX_JOBS,
        limits: Limits | None = None,
        functions: Mapping[str, HostFunction] | None = None,
        position_key: bytes | None = None,
        basichttp: OutboundPolicy | None = None,
    ) -> None:
        if timers_queue == invoke_queue:
            raise ConfigError("invoke_queue", "the timers and invoke queues must differ")
        if isinstance(max_jobs, bool) or not isinstance(max_jobs, int) or max_jobs < 1:
            raise ConfigError("max_jobs", "max_jobs must be a positive integer")
        self.pool = pool
        self.oban = Oban(pool=pool, name=f"statifier_testing_{uuid.uuid4().hex[:12]}")
        """A client-mode ``Oban`` (it runs no queue: the environment runs the jobs)."""
        self.config = execution_config(
            self.oban, timers_queue=timers_queue, invoke_queue=invoke_queue
        )
        self.queues = [timers_queue, invoke_queue]
        self.clock = Clock(self.oban, self.queues)
        """The clock of the environment's queues (``advance`` moves it)."""
        self.max_jobs = max_jobs
        self.elapsed_ms = 0
        """How far the clock has been moved so far."""
        self.ran: list[RanJob] = []
        """Every job the environment ran, in order."""
        self.steps: deque[StepRecord] = deque(maxlen=STEPS_KEPT)
        """The newest committed steps of every execution, oldest first."""
        self._scripts: dict[str, ScriptedInvocations] = {}
        self._watch = ErrorWatch(allow_errors)
        self._errors: list[tuple[str, ErrorRaised]] = []
        self._errors_seen = 0
        self._unexpected: list[tuple[str, ErrorRaised]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._failures: list[BaseException] = []
        self._held: set[asyncio.Task[Any]] = set()
        self._changed = asyncio.Event()
        self._node = f"statifier-testing-{uuid.uuid4().hex[:8]}"
        self._opened = time.monotonic()
        self.executor = _EnvExecutor(self, handlers, basichttp)
        self.executions = Executions(
            pool,
            executor=self.executor,
            observer=self._observe,
            limits=limits,
            functions=functions,
            position_key=position_key,
            prefix=_statements.prefix_of(self.oban),
        )

    @classmethod
    @asynccontextmanager
    async def open(cls, database_url: str, **options: Any) -> AsyncIterator[DurableEnv]:
        """An environment on the database at ``database_url``, whose schema is installed
        (``statifier_oban.schema.install``); ``options`` are the constructor's. It is the
        process's one: ``statifier_oban.executions.use`` points at its ``Executions``
        until it closes. Held invocation runs are cancelled when it closes."""
        global _active
        if _active is not None:
            raise ConfigError("testing", "another statifier_oban.testing environment is open")
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            database_url, open=False, min_size=1, max_size=4
        )
        await pool.open(wait=True)
        env: DurableEnv | None = None
        try:
            env = cls(pool, **options)
            use(env.executions)
            _active = env
            yield env
        finally:
            _active = None
            use(None)
            if env is not None:
                await env._close()
            await pool.close()

    async def _close(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.executor.close()
        _oban_compat.forget_instance(self.oban)

    def session_config(self, **options: Any) -> Config:
        """A ``Config`` for live sessions on this environment's clock: their durable
        timers (``DurableTimers(env.session_config())``) are jobs of its timers queue,
        delivered into the live sessions of this process (the default deliveries) when
        ``advance`` makes them due. ``options`` are ``Config``'s."""
        return Config(
            oban=self.oban, timers_queue=self.queues[0], invoke_queue=self.queues[1], **options
        )

    # -- invocations ---------------------------------------------------------------------

    def invocations(
        self, invoke_type: str, *, max_attempts: int | None = None
    ) -> ScriptedInvocations:
        """The script of ``invoke_type``: its invocations are answered by the test (held
        until ``release`` unless ``answer`` was given). ``max_attempts`` (1 unless given
        when the script is first made, fixed then) is how many attempts an invocation's
        job has: with more than one, an ``Error`` answer is retried after oban's backoff
        (which ``advance`` skips)."""
        script = self._scripts.get(invoke_type)
        if script is None:
            attempts = 1 if max_attempts is None else max_attempts
            if isinstance(attempts, bool) or not isinstance(attempts, int):
                raise ConfigError("max_attempts", "max_attempts must be an integer")
            if not 1 <= attempts <= 32767:
                raise ConfigError("max_attempts", "max_attempts must be in 1..32767")
            script = ScriptedInvocations(self, invoke_type, attempts)
            self._scripts[invoke_type] = script
        elif max_attempts is not None and max_attempts != script.max_attempts:
            raise ConfigError(
                "max_attempts",
                f"{invoke_type!r} is scripted with max_attempts={script.max_attempts}",
            )
        return script

    def script(self, invoke_type: str) -> ScriptedInvocations:
        """The script of ``invoke_type`` (``LookupError`` if the test made none)."""
        found = self._scripts.get(invoke_type)
        if found is None:
            raise LookupError(f"no script for invoke type {invoke_type!r}")
        return found

    @asynccontextmanager
    async def holding(self) -> AsyncIterator[None]:
        """The current task (a job's run) waits for the test inside the block: the
        environment does not wait for it to finish before it moves on."""
        task = asyncio.current_task()
        assert task is not None  # noqa: S101 - called from a job's run, which is a task
        self._held.add(task)
        self._changed.set()
        try:
            yield
        finally:
            self._held.discard(task)

    # -- errors --------------------------------------------------------------------------

    def allow_errors(self, *descriptors: str) -> None:
        """Tolerate ``error.*`` events matching these descriptors from now on."""
        self._watch.allow(*descriptors)

    @contextmanager
    def expect_error(self, descriptor: str = "error") -> Iterator[list[ErrorRaised]]:
        """Errors matching ``descriptor`` are expected in the block (at least one must be
        raised by the time it ends, whichever execution raised it)."""
        with self._watch.expect(descriptor, self.summary) as matched:
            yield matched
            self._collect()

    def check_errors(self, during: str = "the test") -> None:
        """Raise ``UnexpectedChartError`` for errors raised since the last check that are
        neither allowed nor expected (``advance`` and ``settle`` call it; the pytest
        fixture calls it when the test ends)."""
        self._collect()
        unexpected, self._unexpected = self._unexpected, []
        self._watch.raise_unexpected(unexpected, during=during, top=None, describe=self.summary)

    def _collect(self) -> None:
        """Sift the errors raised since the last look: expected ones go to their
        ``expect_error`` block, the rest wait for ``check_errors``."""
        new = self._errors[self._errors_seen :]
        self._errors_seen = len(self._errors)
        self._unexpected.extend(self._watch.sift(new))

    def _observe(self, stepped: Stepped) -> None:
        execution = stepped.execution
        state = stepped.state
        states = state.final_configuration if state.status == "done" else state.active_leaf_ids()
        self.steps.append(
            StepRecord(
                execution.id,
                _job_label.get(),
                execution.status,
                states,
                tuple(type(effect).__name__ for effect in stepped.effects),
                self.now_ms,
            )
        )
        for effect in stepped.effects:
            if isinstance(effect, ErrorRaised):
                self._errors.append((execution.id, effect))

    def summary(self) -> str:
        """The clock, the number of jobs run and the last steps (a failed test shows it)."""
        lines = [
            f"  at t={format_duration(self.now_ms)} (the clock moved "
            f"{format_duration(self.elapsed_ms)}); jobs run: {len(self.ran)}"
        ]
        lines.extend(f"  {line}" for line in _steps_lines(list(self.steps)[-8:]))
        return "\n".join(lines)

    # -- time ----------------------------------------------------------------------------

    @property
    def now_ms(self) -> int:
        """The environment's time: milliseconds since it opened, the clock's moves
        included (the wall clock runs on between them)."""
        return round((time.monotonic() - self._opened) * 1000) + self.elapsed_ms

    async def settle(self) -> list[RanJob]:
        """Run every job due now, and what they lead to, until nothing is due (held runs
        wait on). Returns the jobs that ran to an outcome or were held meanwhile."""
        first = len(self.ran)
        await self._run_due(first)
        self.check_errors("settle")
        return self.ran[first:]

    async def advance(self, span: str | int | timedelta) -> list[RanJob]:
        """Let ``span`` pass (``"7d"``, ``"1h 30m"``, milliseconds, a ``timedelta``):
        every job due on the way runs, in due order, and what each leads to runs before
        the clock moves on. Returns the jobs that ran to an outcome or were held meanwhile."""
        millis = span_ms(span)
        remaining_us = millis * 1000
        first = len(self.ran)
        await self._run_due(first)
        while True:
            move = await self._move_clock(remaining_us)
            remaining_us -= move.moved_us
            if not move.reached:
                break
            if not await self._run_due(first):
                break  # due, yet nothing could run (e.g. no attempt left): nothing to wait for
        self.check_errors(f"advance {format_duration(millis)}")
        return self.ran[first:]

    async def _move_clock(self, span_us: int) -> Move:
        """Move the clock by at most ``span_us``, to the next due job if that is closer."""
        move = await self.clock.move(span_us)
        self.elapsed_ms = self.clock.moved_us // 1000
        return move

    async def _run_due(self, first: int) -> list[RanJob]:
        """Run the jobs due now until none is; ``first`` is where the calling ``advance``
        or ``settle`` began in ``ran``, from which ``max_jobs`` counts."""
        ran: list[RanJob] = []
        prefix = _statements.prefix_of(self.oban)
        while True:
            await stage_due(self.pool, prefix, self.queues, STAGE_LIMIT)
            job = await self._fetch(prefix)
            if job is None:
                if await self._wait_for_running():
                    continue  # a run finished: it may have made jobs due now
                return ran
            if len(self.ran) - first >= self.max_jobs:
                raise ChartAssertionError(
                    f"{self.max_jobs} jobs ran and more are due: a chart that keeps "
                    "scheduling work due at once? (DurableEnv(max_jobs=...) raises the bound)\n"
                    + self.summary()
                )
            ran.append(await self._run(job))

    async def _fetch(self, prefix: str) -> Job | None:
        for queue in self.queues:
            fetched = await _fetch.fetch(
                _oban_compat.FetchRequest(
                    pool=self.pool,
                    prefix=prefix,
                    queue=queue,
                    node=self._node,
                    uuid=self._node,
                    demand=1,
                )
            )
            if fetched.jobs:
                return fetched.jobs[0]
        return None

    async def _run(self, job: Job) -> RanJob:
        finished: list[RanJob] = []

        async def execute() -> None:
            _job_label.set(_label(job))
            try:
                state = await _oban_compat.run_job(self.oban, job)
            except Exception as exc:  # the environment's own failure: the ack, the database
                self._failures.append(exc)
            else:
                record = _ran(job, state or "none", self.now_ms)
                self.ran.append(record)
                finished.append(record)
            self._changed.set()

        task = asyncio.create_task(execute())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        while not task.done() and task not in self._held:
            self._changed.clear()
            changed = asyncio.ensure_future(self._changed.wait())
            await asyncio.wait({task, changed}, return_when=asyncio.FIRST_COMPLETED)
            changed.cancel()
        self._raise_failure()
        if task.done():
            return finished[0]
        record = _ran(job, "held", self.now_ms)
        self.ran.append(record)
        return record

    async def _wait_for_running(self) -> bool:
        """Wait until a running, not held, job finishes; False when none is running."""
        running = {task for task in self._tasks if task not in self._held and not task.done()}
        if not running:
            return False
        self._changed.clear()
        changed = asyncio.ensure_future(self._changed.wait())
        await asyncio.wait({*running, changed}, return_when=asyncio.FIRST_COMPLETED)
        changed.cancel()
        self._raise_failure()
        return True

    def _raise_failure(self) -> None:
        """Raise what made a job's run fail outside the job (a failed ack, the database):
        never lost, as a worker's would not be."""
        if self._failures:
            raise self._failures.pop(0)

    # -- reading and checking ------------------------------------------------------------

    async def load(self, execution_id: str) -> tuple[Execution, MachineState]:
        """The execution's row and position (``Executions.load``)."""
        return await self.executions.load(execution_id)

    async def describe(self, execution_id: str) -> str:
        """Where the execution stands: status, states, datamodel, its last steps, its
        pending jobs, the errors it raised (what a failed check shows)."""
        execution, state = await self.load(execution_id)
        jobs = await pending_jobs(self.oban, execution_id, limit=20)
        held = {
            run.invoke.invoke_id
            for script in self._scripts.values()
            for run in script.held
            if run.scope == execution_id
        }
        now = (await self._move_clock(0)).db_now
        return describe_execution(
            execution,
            state,
            jobs,
            now,
            held=held,
            steps=[step for step in self.steps if step.execution_id == execution_id][-8:],
            errors=[error for where, error in self._errors if where == execution_id][-5:],
            now_ms=self.now_ms,
            elapsed_ms=self.elapsed_ms,
        )

    async def _fail(self, execution_id: str, message: str) -> ChartAssertionError:
        return ChartAssertionError(f"{message}\n" + await self.describe(execution_id))

    async def assert_status(self, execution_id: str, status: str) -> None:
        """The execution's status is ``status`` (``active``, ``completed``, ``failed``,
        ``cancelled``, ``needs_migration``)."""
        execution = await self.executions.get(execution_id)
        if execution.status != status:
            raise await self._fail(
                execution_id, f"expected {execution_id} to be {status}, not {execution.status}"
            )

    async def assert_active(self, execution_id: str, *state_ids: str) -> None:
        """Each of these states is active in the execution."""
        _, state = await self.load(execution_id)
        problem = unknown_state(state.machine, state_ids)
        missing = [s for s in state_ids if not state.is_active(s)]
        if problem is not None or missing:
            raise await self._fail(execution_id, problem or f"expected {ids(missing)} to be active")

    async def assert_done(
        self, execution_id: str, final: str | None = None, **donedata: Any
    ) -> None:
        """The execution completed, in the top-level final state ``final`` if given, with
        a donedata holding ``donedata``'s keys and values if given."""
        execution, state = await self.load(execution_id)
        problem = unknown_state(state.machine, [final] if final is not None else [])
        if problem is None and execution.status != "completed":
            problem = f"expected {execution_id} to be completed, not {execution.status}"
        if problem is None and final is not None and state.final_configuration != (final,):
            problem = (
                f"expected {execution_id} to end in {final!r}; the final state reached: "
                f"{ids(state.final_configuration)}"
            )
        if problem is None and donedata:
            outcome = execution.outcome or {}
            problem = subset_problem("donedata", outcome.get("donedata"), donedata)
        if problem is not None:
            raise await self._fail(execution_id, problem)

    async def assert_datamodel(
        self, execution_id: str, expected: Mapping[str, Any] | None = None, **values: Any
    ) -> None:
        """These variables of the execution hold these values (others are not checked)."""
        _, state = await self.load(execution_id)
        problem = subset_problem("datamodel", state.datamodel, {**(expected or {}), **values})
        if problem is not None:
            raise await self._fail(execution_id, problem)

    async def assert_timer(
        self,
        execution_id: str,
        send_id: str | None = None,
        *,
        event: str | None = None,
        due: str | int | timedelta | None = None,
    ) -> None:
        """A timer of the execution is pending, with this ``send_id``/``event`` if given,
        due ``due`` from now if given (within ``DUE_TOLERANCE_MS``)."""
        jobs = await pending_jobs(self.oban, execution_id, limit=100)
        now = (await self._move_clock(0)).db_now
        want_ms = None if due is None else span_ms(due)
        for job in jobs:
            if job.kind != "timer" or job.state not in ("scheduled", "available", "retryable"):
                continue
            if send_id is not None and job.send_id != send_id:
                continue
            if event is not None and job.event != event:
                continue
            left_ms = (job.scheduled_at - now) // timedelta(milliseconds=1)
            if want_ms is None or abs(left_ms - want_ms) <= DUE_TOLERANCE_MS:
                return
        filters = [f"send_id {send_id!r}" if send_id else "", f"event {event!r}" if event else ""]
        label = " and ".join(f for f in filters if f) or "any"
        when = f" due in {format_duration(want_ms)}" if want_ms is not None else ""
        raise await self._fail(execution_id, f"expected a pending timer ({label}){when}")

    async def assert_no_timer(
        self, execution_id: str, send_id: str | None = None, *, event: str | None = None
    ) -> None:
        """No timer of the execution with this ``send_id``/``event`` is pending (none at
        all if neither is given)."""
        for job in await pending_jobs(self.oban, execution_id, limit=100):
            if job.kind != "timer":
                continue
            if (send_id is None or job.send_id == send_id) and (
                event is None or job.event == event
            ):
                raise await self._fail(
                    execution_id,
                    f"expected no pending timer; {job.event!r} (send_id {job.send_id}, "
                    f"job {job.job_id}) is {job.state}",
                )


def _label(job: Job) -> str:
    kind = _WORKER_NAMES.get(job.worker, job.worker)
    args = job.args if isinstance(job.args, dict) else {}
    what = args.get("event") or args.get("invoke_id")
    return f"{kind} {what!r} (job {job.id})" if isinstance(what, str) else f"{kind} (job {job.id})"


def _ran(job: Job, outcome: str, at_ms: int) -> RanJob:
    args = job.args if isinstance(job.args, dict) else {}

    def text(key: str) -> str | None:
        value = args.get(key)
        return value if isinstance(value, str) else None

    return RanJob(
        job_id=job.id or 0,
        kind=_WORKER_NAMES.get(job.worker, job.worker),
        scope=text("scope"),
        event=text("event") if job.worker == TIMER_WORKER else None,
        send_id=text("send_id"),
        invoke_id=text("invoke_id"),
        attempt=job.attempt,
        outcome=outcome,
        at_ms=at_ms,
    )


def _steps_lines(steps: list[StepRecord]) -> list[str]:
    if not steps:
        return ["last steps: none"]
    lines = ["last steps (oldest first):"]
    for step in steps:
        effects = ", ".join(step.effects[:8]) or "none"
        lines.append(
            f"  t={format_duration(step.at_ms)} {step.execution_id}: {step.cause} -> "
            f"{step.status} in {', '.join(step.states) or '-'} (effects: {effects})"
        )
    return lines


__all__ = ["DurableEnv", "RanJob", "StepRecord", "active_env"]
