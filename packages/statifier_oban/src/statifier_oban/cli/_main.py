"""The ``statifier-oban`` command line: the command registry, its parser and the core commands.

Each subcommand is one :class:`Command` in the :data:`commands` registry: a function that
adds its arguments to its subparser and a function that runs it and returns the exit code.
Add a subcommand by writing those two functions and calling :func:`register`.

Subcommands:

``install``
    Install oban's schema plus the statifier_oban indexes
    (``statifier-oban install --database-url URL [--prefix P]``).
``demo``
    The card-authorization demo: a hold timer outlives a deploy
    (``statifier-oban demo [--hold 3s] [--database-url URL]``). The demo is a package of
    its own, ``statifier_demo`` (``statifier-demo``), imported only by this subcommand.
``worker``
    Run oban queues for a host until SIGINT/SIGTERM (``statifier-oban worker
    --database-url URL --queue timers=10 [--module myapp.timers ...] [--path DIR ...]
    [--prefix P] [--rescue-after S] [--rescue-interval S] [--stuck-after S]
    [--shutdown-grace S]``); see docs/operations.md.
``pending``
    Print ``scope<TAB>count`` of pending timers per scope
    (``statifier-oban pending --database-url URL SCOPE...``).
``executions``
    List, show, send an event to and cancel durable executions (``statifier-oban
    executions list|show|send|cancel ...``), and move them between chart revisions
    (``revisions|register|migrate|park|unpark|retire``). Registered, together with
    ``worker``'s execution options, only when statifier_persistence is installed
    (``statifier_oban.cli._executions``, ``statifier_oban.cli._revisions``).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from oban import Oban
from oban import telemetry as oban_telemetry
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import AsyncConnectionPool

from .. import telemetry
from .._config import Config
from .._errors import StatifierObanError
from ..rows import _resolve
from ..store import _operations
from ..store._schema import INDEXES, OBAN_TABLES, SchemaError, check_prefix, describe, verify
from ..store._schema import install as install_schema
from ..timers._schedule import pending_for

PROG = "statifier-oban"
"""The console script name."""


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, one-line help, argument setup and runner."""

    name: str
    """The word typed after ``statifier-oban``."""
    help: str
    """One line shown by ``statifier-oban --help``."""
    add_arguments: Callable[[argparse.ArgumentParser], None]
    """Adds the subcommand's options to its subparser."""
    run: Callable[[argparse.Namespace], int]
    """Runs the subcommand with the parsed arguments and returns the exit code."""
    forwards_arguments: bool = False
    """Whether the subcommand parses its own arguments: every argument after its name is
    left unparsed in ``args.forwarded`` (its subparser has no ``--help`` of its own)."""


commands: dict[str, Command] = {}
"""Registered subcommands by name, in registration order."""


def register(command: Command) -> Command:
    """Add ``command`` to :data:`commands` (replacing one of the same name) and return it."""
    commands[command.name] = command
    return command


def _prefix_argument(value: str) -> str:
    """argparse ``type=`` for a schema prefix: a plain lowercase identifier."""
    try:
        return check_prefix(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_install_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``install``: ``--database-url`` (default ``$DATABASE_URL``) and ``--prefix``."""
    default_url = os.environ.get("DATABASE_URL")
    parser.add_argument(
        "--database-url",
        metavar="URL",
        default=default_url,
        required=default_url is None,
        help="libpq connection string or URL (default: $DATABASE_URL)",
    )
    parser.add_argument(
        "--prefix",
        metavar="P",
        default="public",
        type=_prefix_argument,
        help="PostgreSQL schema of the oban tables (default: public)",
    )


def install_command(args: argparse.Namespace) -> int:
    """Install oban's schema and our indexes; print what was done; 1 on SchemaError."""
    url: str = args.database_url
    prefix: str = args.prefix
    try:
        asyncio.run(install_schema(url, prefix=prefix))
    except SchemaError as exc:
        print(f"{PROG} install: error: {exc}", file=sys.stderr)
        return 1
    print(
        f"installed oban's tables and the indexes {', '.join(INDEXES)} "
        f"in schema {prefix!r} of {describe(url)}"
    )
    return 0


register(
    Command(
        name="install",
        help="install oban's schema and the statifier_oban indexes (idempotent)",
        add_arguments=add_install_arguments,
        run=install_command,
    )
)


# -- demo, worker, pending --------------------------------------------------------------------

WORKER_NAME = "statifier-oban-worker"
"""The oban instance name of ``statifier-oban worker``."""

PENDING_QUEUE = "timers"
"""The ``timers_queue`` of the ``Config`` that ``pending`` builds (a count reads no queue)."""

CONNECT_TIMEOUT_S = 10
"""``connect_timeout`` for ``worker`` and ``pending`` when the conninfo sets none."""


class CommandError(StatifierObanError):
    """A subcommand cannot go on; the message is printed as one line, and the status is 1."""


def fail(command: str, message: object) -> int:
    """Print ``statifier-oban COMMAND: error: MESSAGE`` (one line) to stderr; return 1."""
    text = " ".join(str(message).split()) or type(message).__name__
    print(f"{PROG} {command}: error: {text}", file=sys.stderr)
    return 1


def _add_database_url(parser: argparse.ArgumentParser) -> None:
    """``--database-url`` (default ``$DATABASE_URL``, required without it) and ``--prefix``."""
    add_install_arguments(parser)


def _with_connect_timeout(url: str) -> str:
    """``url`` with a ``connect_timeout`` unless it (or ``$PGCONNECT_TIMEOUT``) sets one."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.Error as exc:
        raise CommandError(f"invalid connection string: {exc}") from None
    if params.get("connect_timeout") or os.environ.get("PGCONNECT_TIMEOUT"):
        return url
    return make_conninfo(url, connect_timeout=CONNECT_TIMEOUT_S)


async def checked_pool(
    url: str, prefix: str, max_size: int, required: tuple[str, ...]
) -> AsyncConnectionPool[Any]:
    """An open pool on ``url`` once the ``required`` tables of ``prefix`` are known to exist.

    The check connects once first, so an unreachable database is one clear error rather
    than a pool timeout. Other missing pieces of the schema (indexes) are logged.
    """
    try:
        missing = await verify(url, prefix=prefix)
    except SchemaError as exc:
        raise CommandError(exc) from None
    absent = [name for name in missing if name in required]
    if absent:
        raise CommandError(
            f"schema {prefix!r} of {describe(url)} lacks {', '.join(absent)}: "
            f"run `{PROG} install` first"
        )
    if missing:
        logging.getLogger("statifier_oban.cli").warning(
            "schema %r lacks %s: run `%s install`", prefix, ", ".join(missing), PROG
        )
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        _with_connect_timeout(url), open=False, min_size=1, max_size=max_size
    )
    try:
        await pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
    except psycopg.Error as exc:
        await pool.close()
        raise CommandError(f"cannot open a pool on {describe(url)}: {exc}") from None
    return pool


DEMO_MODULE = "statifier_demo"
"""The demo's import package (distribution ``statifier-demo``), imported only by ``demo``."""


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    """A subcommand that parses its own arguments adds none here."""


def run_demo_command(args: argparse.Namespace) -> int:
    """Run the card-authorization demo, imported here so that no other command loads it.

    Without the package, one line says what to install, and the status is 1.
    """
    try:
        demo = importlib.import_module(DEMO_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != DEMO_MODULE:
            raise
        return fail(
            "demo",
            f"the demo is the package {DEMO_MODULE}, which is not installed: "
            "pip install statifier-demo (in the repository, uv sync installs it)",
        )
    code: int = demo.main(args.forwarded, prog=f"{PROG} demo")
    return code


register(
    Command(
        name="demo",
        help="a card authorization's hold timer survives a deploy (embedded PostgreSQL; "
        "package statifier-demo)",
        add_arguments=_no_arguments,
        run=run_demo_command,
        forwards_arguments=True,
    )
)


def _queue_argument(value: str) -> tuple[str, int]:
    """argparse ``type=`` for ``--queue NAME=LIMIT``."""
    name, sep, limit = value.partition("=")
    name = name.strip()
    try:
        count = int(limit)
    except ValueError:
        count = 0
    if not sep or not name or count < 1:
        raise argparse.ArgumentTypeError(
            f"expected NAME=LIMIT with a limit of at least 1 (e.g. timers=10), not {value!r}"
        )
    return name, count


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

HEARTBEATS_PER_RESCUE = 5
"""Producer heartbeats (oban's Refresher) per ``--rescue-after``: a live worker misses
several in a row before it looks gone."""


def _seconds_argument(value: str) -> float:
    """argparse ``type=`` for a positive number of seconds."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < 1e7:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, not {value!r}")
    return seconds


def add_worker_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``worker``: the database, queues, host modules, rescue and shutdown."""
    _add_database_url(parser)
    parser.add_argument(
        "--queue",
        action="append",
        required=True,
        type=_queue_argument,
        metavar="NAME=LIMIT",
        help="run queue NAME with up to LIMIT jobs at once (repeat for more queues)",
    )
    parser.add_argument(
        "--module",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first: job rows may name the deliveries, handlers, codecs and "
        "child starters it defines or registers (repeatable)",
    )
    parser.add_argument(
        "--path",
        action="append",
        default=[],
        metavar="DIR",
        help="add DIR to the import path before importing modules (repeatable; the "
        "current directory is not on it unless named, e.g. --path .)",
    )
    parser.add_argument(
        "--node", default=None, help="oban node name, unique per process (default: host.pid)"
    )
    parser.add_argument(
        "--rescue-after",
        type=_seconds_argument,
        default=DEFAULT_RESCUE_AFTER_S,
        metavar="S",
        help="a worker whose heartbeat stops for S seconds is gone: its executing jobs "
        f"run again (default: {DEFAULT_RESCUE_AFTER_S:g})",
    )
    parser.add_argument(
        "--rescue-interval",
        type=_seconds_argument,
        default=DEFAULT_RESCUE_INTERVAL_S,
        metavar="S",
        help="look for jobs of workers that are gone every S seconds "
        f"(default: {DEFAULT_RESCUE_INTERVAL_S:g})",
    )
    parser.add_argument(
        "--stuck-after",
        type=_seconds_argument,
        default=DEFAULT_STUCK_AFTER_S,
        metavar="S",
        help="a job executing for S seconds on a live worker runs again (oban's Lifeline); "
        f"keep it above your longest job (default: {DEFAULT_STUCK_AFTER_S:g})",
    )
    parser.add_argument(
        "--shutdown-grace",
        type=_seconds_argument,
        default=DEFAULT_SHUTDOWN_GRACE_S,
        metavar="S",
        help="on SIGINT/SIGTERM, let running jobs finish for S seconds, then put the rest "
        f"back (default: {DEFAULT_SHUTDOWN_GRACE_S:g})",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="logging level (default: INFO)",
    )


def set_import_path(paths: list[str]) -> None:
    """Leave the current directory off ``sys.path`` unless ``paths`` names it; add ``paths``.

    ``python -m`` puts the working directory first on the path; a worker must not import
    whatever file sits where it was started, so that entry (and ``''``) is removed.
    """
    cwd = os.getcwd()
    wanted = [os.path.abspath(path) for path in paths]
    if sys.path and sys.path[0] in ("", cwd) and cwd not in wanted:
        del sys.path[0]
    while "" in sys.path:
        sys.path.remove("")
    rest = [entry for entry in sys.path if entry not in wanted]
    sys.path[:] = [*dict.fromkeys(wanted), *rest]


def import_host_modules(modules: list[str], paths: list[str] | None = None) -> None:
    """Set the import path, import the workers and ``modules``, and allow their classes.

    Job rows may then name any class those modules define (ADR 13). Raises
    ``CommandError`` naming the first module that does not import.
    """
    set_import_path(paths or [])
    importlib.import_module("statifier_oban.workers")  # registers the workers with oban
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as exc:
            raise CommandError(
                f"cannot import module {module!r}: {type(exc).__name__}: {exc}"
            ) from None
        _resolve.allow_module(module)


def _log_event(name: str, meta: dict[str, Any]) -> None:
    """A worker's log line per statifier_oban telemetry event."""
    details = " ".join(
        f"{key}={meta[key]}"
        for key in ("scope", "send_id", "invoke_id", "job_id", "attempt", "count", "reason")
        if meta.get(key) is not None
    )
    logging.getLogger("statifier_oban.worker").info("%s %s", name, details)


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
            log.warning("looking for jobs of workers that are gone failed: %s", exc)
            continue
        if rescued:
            log.warning(
                "rescued %d executing jobs of workers that are gone: %s",
                len(rescued),
                rescued[:20],
            )


async def run_worker(
    url: str,
    queues: dict[str, int],
    *,
    prefix: str = "public",
    node: str | None = None,
    options: WorkerOptions | None = None,
    on_start: WorkerHook | None = None,
) -> int:
    """Run ``queues`` in a server-mode ``Oban`` until SIGINT or SIGTERM; stop gracefully.

    Prints one ``running`` line once the queues run and one ``stopped`` line at the end.
    A second signal while stopping gets Python's default behaviour (a forced exit).
    ``on_start`` runs before the queues start.
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
    try:
        if on_start is not None:
            on_start(pool, oban, prefix)
        try:
            await oban.start()
        except Exception as exc:
            raise CommandError(f"oban did not start: {exc}") from None
        rescuer = asyncio.create_task(_rescue_loop(pool, prefix, options), name="rescue")
        shown = ", ".join(f"{name}={limit}" for name, limit in queues.items())
        print(
            f"{PROG} worker: running queues {shown} on {describe(url)}, schema {prefix!r}, "
            f"node {node}; stop with SIGINT or SIGTERM",
            flush=True,
        )
        await stop.wait()
        print(f"{PROG} worker: {received[0]} received, stopping", flush=True)
    finally:
        if rescuer is not None:
            rescuer.cancel()
            await asyncio.gather(rescuer, return_exceptions=True)
        await oban.stop()
        await _put_back(pool, prefix, node, cut_short)
        await pool.close()
        oban_telemetry.detach(handler_id)
        oban_telemetry.detach(f"{handler_id}-shutdown")
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
    print(f"{PROG} worker: stopped", flush=True)
    return 0


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


def worker_command(args: argparse.Namespace, on_start: WorkerHook | None = None) -> int:
    """Import the host modules, then run the queues until SIGINT/SIGTERM; 1 on any error."""
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s [%(levelname)s] %(name)s: %(message)s"
    )
    queues: dict[str, int] = {}
    for name, limit in args.queue:
        if name in queues:
            return fail("worker", f"queue {name!r} is given twice")
        queues[name] = limit
    try:
        import_host_modules(args.module, args.path)
        options = WorkerOptions(
            rescue_after=args.rescue_after,
            rescue_interval=args.rescue_interval,
            stuck_after=args.stuck_after,
            shutdown_grace=args.shutdown_grace,
        )
        return asyncio.run(
            run_worker(
                args.database_url,
                queues,
                prefix=args.prefix,
                node=args.node,
                options=options,
                on_start=on_start,
            )
        )
    except CommandError as exc:
        return fail("worker", exc)


register(
    Command(
        name="worker",
        help="run oban queues (e.g. the timers queue) for a host until SIGINT/SIGTERM",
        add_arguments=add_worker_arguments,
        run=worker_command,
    )
)


def _scope_argument(value: str) -> str:
    """argparse ``type=`` for a scope: a non-empty string."""
    if not value:
        raise argparse.ArgumentTypeError("a scope cannot be empty")
    return value


def add_pending_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``pending``: the database and one or more scopes."""
    _add_database_url(parser)
    parser.add_argument(
        "scopes",
        nargs="+",
        type=_scope_argument,
        metavar="SCOPE",
        help="a session id (live hosts) or durable execution id",
    )


async def count_pending(url: str, scopes: list[str], *, prefix: str = "public") -> dict[str, int]:
    """``pending_for`` through a client-mode ``Oban`` on a pool of its own."""
    pool = await checked_pool(url, prefix, 1, ("oban_jobs",))
    try:
        oban = Oban(pool=pool, name=f"statifier-oban-pending-{os.getpid()}", prefix=prefix)
        config = Config(oban=oban, timers_queue=PENDING_QUEUE)
        try:
            return await pending_for(config, scopes)
        except (StatifierObanError, psycopg.Error) as exc:
            raise CommandError(f"counting pending timers failed: {exc}") from None
    finally:
        await pool.close()


def pending_command(args: argparse.Namespace) -> int:
    """Print ``scope<TAB>count`` per scope (each once, in the order given); 1 on any error."""
    try:
        counts = asyncio.run(count_pending(args.database_url, args.scopes, prefix=args.prefix))
    except CommandError as exc:
        return fail("pending", exc)
    for scope, count in counts.items():
        print(f"{scope}\t{count}")
    return 0


register(
    Command(
        name="pending",
        help="print how many timers are pending per scope (scope<TAB>count)",
        add_arguments=add_pending_arguments,
        run=pending_command,
    )
)


def _package_version() -> str:
    from .. import __version__

    return __version__


OPTIONAL_COMMANDS = {
    "statifier_oban.cli._executions": "statifier_persistence",
    "statifier_oban.cli._revisions": "statifier_persistence",
}
"""Modules registering commands of an optional package, and the package each needs."""


def register_optional_commands() -> None:
    """Import the modules of :data:`OPTIONAL_COMMANDS` whose package is installed."""
    for module, needs in OPTIONAL_COMMANDS.items():
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != needs:
                raise


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with one subparser per registered command."""
    register_optional_commands()
    parser = argparse.ArgumentParser(
        prog=PROG, description="Durable SCXML timers as oban jobs on PostgreSQL."
    )
    version = f"%(prog)s {_package_version()}"
    parser.add_argument("--version", action="version", version=version)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in commands.values():
        subparser = subparsers.add_parser(
            command.name, help=command.help, add_help=not command.forwards_arguments
        )
        if not command.forwards_arguments:
            subparser.add_argument("--version", action="version", version=version)
        command.add_arguments(subparser)
        subparser.set_defaults(_command=command)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), run the subcommand, return its exit code.

    Usage errors exit with status 2 through argparse, as usual.
    """
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    command: Command = args._command
    if command.forwards_arguments:
        args.forwarded = rest
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return command.run(args)
