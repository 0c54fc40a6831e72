"""``statifier-oban worker``: run oban queues for a host until SIGINT or SIGTERM.

The worker imports the modules ``--module`` names (from the import path and ``--path``
only, ``statifier.cli.kit``'s rule) and lets job rows name the classes they define
(ADR 13). With ``statifier_persistence`` installed it delivers fired timers and
invocation answers into durable executions (``statifier_oban.cli._persistence``), with the
execution options; without it, those options say what to install. While running, it
rescues the executing jobs of workers that are gone; on a stop it lets running jobs finish
for ``--shutdown-grace`` and puts the rest back. See docs/operations.md. With ``--otel`` it
traces and measures its jobs through OpenTelemetry (``statifier_oban.otel``, set up from
the ``OTEL_*`` variables) and samples the gauges every ``--otel-interval`` seconds; see
docs/tracing.md. Its log lines are text or JSON (``--log-format``), each with the fields of
the telemetry event it reports.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import logging
import os
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import click
from oban import Oban
from oban import telemetry as oban_telemetry
from psycopg_pool import AsyncConnectionPool
from statifier import logs
from statifier.chart.durations import InvalidDuration, format_duration, parse_duration
from statifier.cli import kit
from statifier.errors import install_hint

from .. import telemetry
from .._errors import StatifierObanError
from ..rows import _resolve
from ..store import _operations
from ..store._schema import OBAN_TABLES, describe
from ._loop import loop_factory, loop_name, loop_option
from ._main import DEFAULT_TIMERS_QUEUE, PROG, checked_pool, database_options, execution_options
from ._tracing import otel_option, start_tracing, stop_tracing

WORKER_NAME = "statifier-oban-worker"
"""The oban instance name of ``statifier-oban worker``."""

DEFAULT_RESCUE_AFTER_S = 10.0
"""``--rescue-after``: a worker silent this long is gone, and its executing jobs come back."""

DEFAULT_RESCUE_INTERVAL_S = 2.0
"""``--rescue-interval``: how often every worker looks for jobs of workers that are gone."""

DEFAULT_STUCK_AFTER_S = 3600.0
"""``--stuck-after``: oban's Lifeline ``rescue_after``, for jobs of live workers (Elixir's
default); it must stay above the longest legitimate job, or that job runs twice."""

DEFAULT_SHUTDOWN_GRACE_S = 10.0
"""``--shutdown-grace``: how long a stopping worker lets running jobs finish (inside the
30 s a container orchestrator usually grants between SIGTERM and SIGKILL)."""

DEFAULT_GAUGE_INTERVAL_S = 30.0
"""``--otel-interval``: how often a worker with ``--otel`` samples the gauges."""

HEARTBEATS_PER_RESCUE = 5
"""Producer heartbeats (oban's Refresher) per ``--rescue-after``: a live worker misses
several in a row before it looks gone."""


class Seconds(click.ParamType[float, Any]):
    """A positive span below 10^7 seconds, in seconds: a duration as every command reads it
    (``30s``, ``1h``, ``1m 30s``) or a bare number of seconds (``10``, ``0.5``), which
    deployments of 0.1.0 set in their environment."""

    name = "duration"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        """The seconds (a usage error otherwise)."""
        seconds = _seconds(value)
        if not 0 < seconds < 1e7:
            self.fail(
                f"expected a positive duration (such as 30s, 1h or a number of seconds), "
                f"not {value!r}",
                param,
                ctx,
            )
        return seconds


def _seconds(value: Any) -> float:
    """``value`` in seconds, or -1 when it is neither a number nor a duration."""
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return parse_duration(text) / 1000
    except InvalidDuration:
        return -1.0


def _shown(seconds: float) -> str:
    """A default as ``--help`` shows it: ``10s``, ``1h``."""
    return format_duration(round(seconds * 1000))


class QueueType(click.ParamType[tuple[str, int], Any]):
    """``NAME=LIMIT``: a queue and how many of its jobs run at once (at least 1)."""

    name = "queue"

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str:
        """``NAME=LIMIT``."""
        return "NAME=LIMIT"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, int]:
        """The queue and its limit (a usage error otherwise)."""
        if isinstance(value, tuple):
            return value
        name, sep, limit = str(value).partition("=")
        name = name.strip()
        try:
            count = int(limit)
        except ValueError:
            count = 0
        if not sep or not name or count < 1:
            self.fail(
                f"expected NAME=LIMIT with a limit of at least 1 (e.g. timers=10), not {value!r}",
                param,
                ctx,
            )
        return name, count


def import_host_modules(modules: list[str], paths: list[str] | None = None) -> None:
    """Set the import path, import the workers and ``modules``, and allow their classes.

    Job rows may then name any class those modules define (ADR 13). Raises
    ``CommandError`` naming the first module that does not import (and ``--path`` when
    it sits in the working directory, off the path).
    """
    kit.set_import_path(paths or [])
    importlib.import_module("statifier_oban.workers")  # registers the workers with oban
    for module in modules:
        kit.import_module(module, "--module")
        _resolve.allow_module(module)


_LOGGED_FIELDS = ("scope", "send_id", "invoke_id", "job_id", "attempt", "count", "reason")
"""The fields of a telemetry event a worker's log line shows."""


def _log_event(name: str, meta: dict[str, Any]) -> None:
    """A worker's log line per statifier_oban telemetry event, its fields as ``extra``."""
    fields = {key: meta[key] for key in _LOGGED_FIELDS if meta.get(key) is not None}
    details = " ".join(f"{key}={value}" for key, value in fields.items())
    logging.getLogger("statifier_oban.worker").info(
        "%s %s", name, details, extra={"event": name, **fields}
    )


WorkerHook = Callable[[AsyncConnectionPool[Any], Oban, str], None]
"""Called with the worker's pool, its (not yet started) ``Oban`` and the schema prefix,
before the queues run: where optional packages install what their deliveries need."""


@dataclass(frozen=True)
class WorkerOptions:
    """How ``statifier-oban worker`` rescues and stops (the defaults are the flags')."""

    rescue_after: float = DEFAULT_RESCUE_AFTER_S
    """Seconds without a heartbeat after which a worker's executing jobs are rescued."""
    rescue_interval: float = DEFAULT_RESCUE_INTERVAL_S
    """Seconds between two looks for jobs of workers that are gone."""
    stuck_after: float = DEFAULT_STUCK_AFTER_S
    """oban's Lifeline ``rescue_after``: jobs executing this long on a live worker."""
    shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE_S
    """Seconds a stopping worker waits for running jobs before putting them back."""

    @property
    def heartbeat(self) -> float:
        """oban's Refresher interval: how often the worker's producers say they are alive."""
        return max(0.2, self.rescue_after / HEARTBEATS_PER_RESCUE)


async def _rescue_loop(pool: AsyncConnectionPool[Any], prefix: str, options: WorkerOptions) -> None:
    """Every ``rescue_interval``, put back the executing jobs of workers that are gone."""
    log = logging.getLogger("statifier_oban.worker")
    while True:
        await asyncio.sleep(options.rescue_interval)
        try:
            rescued = await _operations.rescue_orphans(
                pool, prefix, name=WORKER_NAME, after_s=options.rescue_after
            )
        except Exception as exc:  # the database may be restarting: the next round retries
            log.warning(
                "looking for jobs of workers that are gone failed: %s",
                exc,
                extra={"error": str(exc)},
            )
            continue
        if rescued:
            log.warning(
                "rescued %d executing jobs of workers that are gone: %s",
                len(rescued),
                rescued[:20],
                extra={"count": len(rescued), "job_ids": rescued[:20]},
            )


async def run_worker(
    url: str,
    queues: dict[str, int],
    *,
    prefix: str = "public",
    node: str | None = None,
    options: WorkerOptions | None = None,
    on_start: WorkerHook | None = None,
    gauges: float | None = None,
) -> int:
    """Run ``queues`` in a server-mode ``Oban`` until SIGINT or SIGTERM; stop gracefully.

    Prints one ``running`` line once the queues run (naming the event loop) and one
    ``stopped`` line at the end.
    A second signal while stopping gets Python's default behaviour (a forced exit).
    ``on_start`` runs before the queues start. ``gauges`` (seconds) samples the gauges of
    ``statifier_oban.otel`` that often while running (tracing must be instrumented).
    While running, jobs of workers that are gone are rescued; on stop, jobs still running
    after the grace period are put back (``available``), each reported in one line.
    """
    options = options or WorkerOptions()
    pool = await checked_pool(url, prefix, sum(queues.values()) + 5, OBAN_TABLES)
    node = node or f"{socket.gethostname()}.{os.getpid()}"
    stop = asyncio.Event()
    received: list[str] = []
    cut_short: list[int] = []
    loop = asyncio.get_running_loop()

    def on_signal(signum: signal.Signals) -> None:
        received.append(signum.name)
        stop.set()
        for other in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(other)

    def on_shutdown(_name: str, meta: dict[str, Any]) -> None:
        cut_short.extend(int(job_id) for job_id in meta.get("orphaned") or ())

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)
    handler_id = f"{WORKER_NAME}-{os.getpid()}"
    oban_telemetry.attach(handler_id, telemetry.events(), _log_event)
    oban_telemetry.attach(f"{handler_id}-shutdown", ["oban.queue.shutdown"], on_shutdown)
    oban = Oban(
        pool=pool,
        name=WORKER_NAME,
        node=node,
        prefix=prefix,
        queues=dict(queues),
        lifeline={"interval": options.rescue_interval, "rescue_after": options.stuck_after},
        refresher={"interval": options.heartbeat},
        shutdown_grace_period=options.shutdown_grace,
    )
    rescuer: asyncio.Task[None] | None = None
    sampler: asyncio.Task[None] | None = None
    try:
        if on_start is not None:
            on_start(pool, oban, prefix)
        try:
            await oban.start()
        except Exception as exc:
            raise kit.CommandError(f"oban did not start: {exc}") from None
        freeze_startup_heap()
        rescuer = asyncio.create_task(_rescue_loop(pool, prefix, options), name="rescue")
        if gauges is not None:
            sampler = asyncio.create_task(_sample_gauges(pool, prefix, gauges), name="gauges")
        shown = ", ".join(f"{name}={limit}" for name, limit in queues.items())
        print(
            f"{PROG} worker: running queues {shown} on {describe(url)}, schema {prefix!r}, "
            f"node {node}, loop {loop_name(loop)}; stop with SIGINT or SIGTERM",
            flush=True,
        )
        await stop.wait()
        print(f"{PROG} worker: {received[0]} received, stopping", flush=True)
    finally:
        for task in (rescuer, sampler):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        await oban.stop()
        await _put_back(pool, prefix, node, cut_short)
        await pool.close()
        oban_telemetry.detach(handler_id)
        oban_telemetry.detach(f"{handler_id}-shutdown")
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
    print(f"{PROG} worker: stopped", flush=True)
    return 0


YOUNG_COLLECTION_THRESHOLD: Final = 10_000
"""Allocations of container objects (less their frees) that set off a collection of the
youngest generation in a started worker (Python's default is 700)."""


def freeze_startup_heap() -> None:
    """Put what the worker holds once started (modules, plug-ins, pools, oban) out of the
    garbage collector's reach (``gc.freeze``): its full collections, which the garbage of
    steps sets off now and then, walk only what came after instead of the whole process.

    The youngest generation is then collected after ``YOUNG_COLLECTION_THRESHOLD``
    allocations instead of 700: a step's objects die by their reference counts, so a
    collection walks about what the steps in flight hold, however rarely it runs; fewer
    of them cost a durable step about 4% fewer instructions (``bench/executions.py
    --callgrind``). The older generations keep their thresholds."""
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, middle, oldest)


async def _sample_gauges(pool: AsyncConnectionPool[Any], prefix: str, interval: float) -> None:
    """Sample the queue depth, and the executions when this worker steps them."""
    from ..otel import GaugeSampler

    executions: Any = None
    try:
        from ..executions import current

        executions = current()
    except (ImportError, StatifierObanError):  # no statifier_persistence, or none installed
        executions = None
    await GaugeSampler(pool, prefix=prefix, executions=executions, interval=interval).run()


async def _put_back(
    pool: AsyncConnectionPool[Any], prefix: str, node: str, cut_short: list[int]
) -> None:
    """Return the jobs the grace period cut short to ``available``; one line says which."""
    if not cut_short:
        return
    try:
        returned = await _operations.return_jobs(pool, prefix, node=node, ids=cut_short)
    except Exception as exc:  # they stay executing: the next worker's rescue takes them
        print(f"{PROG} worker: could not put back jobs {cut_short[:20]}: {exc}", flush=True)
        return
    print(
        f"{PROG} worker: put back {len(returned)} jobs cut short by the stop: {returned[:20]}",
        flush=True,
    )


@click.command(
    cls=kit.Command, help="Run oban queues (e.g. the timers queue) for a host until SIGINT/SIGTERM."
)
@database_options
@click.option(
    "--queue", "queues", multiple=True, required=True, type=QueueType(),
    envvar="STATIFIER_OBAN_QUEUES", show_envvar=True,
    help="run queue NAME with up to LIMIT jobs at once (repeatable)",
)  # fmt: skip
@click.option(
    "--module", "modules", multiple=True, metavar="MODULE",
    envvar="STATIFIER_OBAN_MODULES", show_envvar=True,
    help="import MODULE first: job rows may name the deliveries, handlers, codecs and "
    "child starters it defines or registers (repeatable)",
)  # fmt: skip
@click.option(
    "--node", default=None, envvar="STATIFIER_OBAN_NODE", show_envvar=True,
    help="oban node name, unique per process (default: host.pid)",
)  # fmt: skip
@click.option(
    "--rescue-after", type=Seconds(), default=_shown(DEFAULT_RESCUE_AFTER_S),
    show_default=True, metavar="DURATION",
    envvar="STATIFIER_OBAN_RESCUE_AFTER", show_envvar=True,
    help="a worker whose heartbeat stops this long is gone: its executing jobs run again",
)  # fmt: skip
@click.option(
    "--rescue-interval", type=Seconds(), default=_shown(DEFAULT_RESCUE_INTERVAL_S),
    show_default=True, metavar="DURATION",
    envvar="STATIFIER_OBAN_RESCUE_INTERVAL", show_envvar=True,
    help="how often to look for jobs of workers that are gone",
)  # fmt: skip
@click.option(
    "--stuck-after", type=Seconds(), default=_shown(DEFAULT_STUCK_AFTER_S),
    show_default=True, metavar="DURATION",
    envvar="STATIFIER_OBAN_STUCK_AFTER", show_envvar=True,
    help="a job executing this long on a live worker runs again (oban's Lifeline); "
    "keep it above your longest job",
)  # fmt: skip
@click.option(
    "--shutdown-grace", type=Seconds(), default=_shown(DEFAULT_SHUTDOWN_GRACE_S),
    show_default=True, metavar="DURATION",
    envvar="STATIFIER_OBAN_SHUTDOWN_GRACE", show_envvar=True,
    help="on SIGINT/SIGTERM, let running jobs finish this long, then put the rest back",
)  # fmt: skip
@click.option(
    "--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]), default="INFO",
    show_default=True, envvar="STATIFIER_OBAN_LOG_LEVEL", show_envvar=True,
    help="logging level",
)  # fmt: skip
@loop_option("the jobs")
@otel_option("the jobs")
@click.option(
    "--otel-interval", type=Seconds(), default=_shown(DEFAULT_GAUGE_INTERVAL_S),
    show_default=True, metavar="DURATION",
    envvar="STATIFIER_OBAN_OTEL_INTERVAL", show_envvar=True,
    help="with --otel, how often to sample the gauges (executions by status, queue depth)",
)  # fmt: skip
@execution_options
def worker(
    database_url: str,
    prefix: str,
    queues: tuple[tuple[str, int], ...],
    modules: tuple[str, ...],
    node: str | None,
    rescue_after: float,
    rescue_interval: float,
    stuck_after: float,
    shutdown_grace: float,
    log_level: str,
    loop: str,
    otel: bool,
    otel_interval: float,
    timers_queue: str,
    invoke_queue: str | None,
    handlers: tuple[tuple[str, str], ...],
    functions: str | None,
    paths: tuple[str, ...],
    history: bool,
) -> int:
    """``statifier-oban worker``: import the host modules, then run the queues."""
    logs.configure(kit.log_format(), log_level)
    factory = loop_factory(loop)  # first: a loop it cannot have stops it before anything runs
    by_name: dict[str, int] = {}
    for name, limit in queues:
        if name in by_name:
            raise kit.CommandError(f"queue {name!r} is given twice")
        by_name[name] = limit
    import_host_modules(list(modules), list(paths))
    on_start: WorkerHook | None = None
    try:
        from . import _persistence
    except ModuleNotFoundError as exc:
        if exc.name != "statifier_persistence":
            raise
        asked = handlers or functions or invoke_queue or timers_queue != DEFAULT_TIMERS_QUEUE
        if asked:
            raise kit.CommandError(
                "--timers-queue, --invoke-queue, --handler and --functions deliver into "
                "durable executions, which need the package statifier_persistence: "
                f"{install_hint('statifier-oban', 'persistence')}"
            ) from None
    else:
        on_start = _persistence.worker_hook(
            _persistence.ExecutionOptions(timers_queue, invoke_queue, handlers, functions, history)
        )
    options = WorkerOptions(
        rescue_after=rescue_after,
        rescue_interval=rescue_interval,
        stuck_after=stuck_after,
        shutdown_grace=shutdown_grace,
    )
    providers = start_tracing() if otel else None
    try:
        return asyncio.run(
            run_worker(
                database_url,
                by_name,
                prefix=prefix,
                node=node,
                options=options,
                on_start=on_start,
                gauges=otel_interval if otel else None,
            ),
            loop_factory=factory,
        )
    finally:
        if on_start is not None:
            _persistence.use(None)
        if providers is not None:
            stop_tracing(providers)
