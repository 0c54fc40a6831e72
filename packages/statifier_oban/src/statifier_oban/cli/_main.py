"""The ``statifier-oban`` group, its database options, and the commands every install has.

``install``
    Install oban's schema plus the statifier_oban indexes
    (``statifier-oban install [--database-url URL] [--prefix P]``).
``pending``
    Print ``scope<TAB>count`` of pending timers per scope
    (``statifier-oban pending [--database-url URL] SCOPE...``).
``worker``
    Run oban queues for a host until SIGINT/SIGTERM (``statifier_oban.cli._worker``).
``demo``
    The card-authorization demo, the package ``statifier_demo`` (imported only by this
    subcommand; without it, the command says what to install).
``db``
    A local PostgreSQL in a data directory it keeps, started and left running until
    stopped (``statifier_oban.cli._db``; needs ``statifier-oban[embedded]``, and says so).
``executions``
    Start, list, show, step, wait for and cancel durable executions, read their history,
    and move them between chart revisions (``statifier_oban.cli._executions``; needs
    ``statifier-oban[persistence]``, and says so).
``web``
    Serve the HTTP API and the web console (``statifier_oban.cli._web``; needs
    ``statifier-oban[web]``, and says so).

Every ``--database-url`` reads ``$DATABASE_URL`` when it is not given, every ``--prefix``
``$STATIFIER_OBAN_PREFIX``. A new command goes into the module of its part and onto the
group it belongs to (see docs/contributing.md, "A new command").
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import Any

import click
import psycopg
from oban import Oban
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import AsyncConnectionPool
from statifier.cli import kit
from statifier.errors import install_hint

from .._config import Config
from .._errors import StatifierObanError
from ..store._schema import INDEXES, SchemaError, check_prefix, describe, verify
from ..store._schema import install as install_schema
from ..timers._schedule import pending_for

PROG = "statifier-oban"
"""The console script name."""

PENDING_QUEUE = "timers"
"""The ``timers_queue`` of the ``Config`` that ``pending`` builds (a count reads no queue)."""

CONNECT_TIMEOUT_S = 10
"""``connect_timeout`` for commands that open a pool when the conninfo sets none."""

DEMO_MODULE = "statifier_demo"
"""The demo's import package (distribution ``statifier-demo``), imported only by ``demo``."""


@click.group(
    cls=kit.Group,
    errors=(StatifierObanError,),
    help="Durable SCXML timers and invocations as oban jobs on PostgreSQL.",
)
@kit.version_option("statifier-oban")
def statifier_oban() -> None:
    """The ``statifier-oban`` command."""


def main(argv: list[str] | None = None) -> int:
    """Run ``statifier-oban`` on ``argv`` (default ``sys.argv[1:]``); return the status."""
    return kit.run(statifier_oban, argv, prog=PROG)


# -- the database options ---------------------------------------------------------------


class PrefixType(click.ParamType[str, Any]):
    """A schema prefix: a plain lowercase identifier (``check_prefix``)."""

    name = "prefix"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        """The prefix (a usage error otherwise)."""
        try:
            return check_prefix(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def _required_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
    if not value:
        raise click.UsageError("give --database-url URL, or set DATABASE_URL", ctx)
    return value


def database_options[F: Callable[..., Any]](function: F) -> F:
    """``--database-url`` (``$DATABASE_URL``) and ``--prefix`` (``$STATIFIER_OBAN_PREFIX``)."""
    url = click.option(
        "--database-url",
        metavar="URL",
        envvar="DATABASE_URL",
        show_envvar=True,
        callback=_required_url,
        help="libpq connection string or URL of the PostgreSQL holding oban's tables",
    )
    prefix = click.option(
        "--prefix",
        metavar="P",
        default="public",
        show_default=True,
        envvar="STATIFIER_OBAN_PREFIX",
        show_envvar=True,
        type=PrefixType(),
        help="PostgreSQL schema of the oban tables",
    )
    return url(prefix(function))


def with_connect_timeout(url: str) -> str:
    """``url`` with a ``connect_timeout`` unless it (or ``$PGCONNECT_TIMEOUT``) sets one."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.Error as exc:
        raise kit.CommandError(f"invalid connection string: {exc}") from None
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
        raise kit.CommandError(exc) from None
    absent = [name for name in missing if name in required]
    if absent:
        raise kit.CommandError(
            f"schema {prefix!r} of {describe(url)} lacks {', '.join(absent)}: "
            f"run `{PROG} install` first"
        )
    if missing:
        logging.getLogger("statifier_oban.cli").warning(
            "schema %r lacks %s: run `%s install`", prefix, ", ".join(missing), PROG
        )
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        with_connect_timeout(url), open=False, min_size=1, max_size=max_size
    )
    try:
        await pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
    except psycopg.Error as exc:
        await pool.close()
        raise kit.CommandError(f"cannot open a pool on {describe(url)}: {exc}") from None
    return pool


# -- install and pending ----------------------------------------------------------------


@statifier_oban.command(help="Install oban's schema and the statifier_oban indexes (idempotent).")
@database_options
@kit.json_option
def install(database_url: str, prefix: str, as_json: bool) -> None:
    """``statifier-oban install``: say what was installed where."""
    asyncio.run(install_schema(database_url, prefix=prefix))
    kit.Output(as_json).line(
        f"installed oban's tables and the indexes {', '.join(INDEXES)} "
        f"in schema {prefix!r} of {describe(database_url)}",
        {"installed": list(INDEXES), "schema": prefix, "database": describe(database_url)},
    )


class ScopeType(click.ParamType[str, Any]):
    """A scope: a session id (live hosts) or a durable execution id; never empty."""

    name = "scope"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        """The scope (a usage error if it is empty)."""
        if not value:
            self.fail("a scope cannot be empty", param, ctx)
        return str(value)


async def count_pending(url: str, scopes: list[str], *, prefix: str = "public") -> dict[str, int]:
    """``pending_for`` through a client-mode ``Oban`` on a pool of its own."""
    pool = await checked_pool(url, prefix, 1, ("oban_jobs",))
    try:
        oban = Oban(pool=pool, name=f"statifier-oban-pending-{os.getpid()}", prefix=prefix)
        config = Config(oban=oban, timers_queue=PENDING_QUEUE)
        try:
            return await pending_for(config, scopes)
        except (StatifierObanError, psycopg.Error) as exc:
            raise kit.CommandError(f"counting pending timers failed: {exc}") from None
    finally:
        await pool.close()


@statifier_oban.command(help="Print how many timers are pending per scope (scope<TAB>count).")
@database_options
@kit.json_option
@click.argument("scopes", nargs=-1, required=True, type=ScopeType(), metavar="SCOPE...")
def pending(database_url: str, prefix: str, as_json: bool, scopes: tuple[str, ...]) -> None:
    """``statifier-oban pending``: one line per scope given, each once, in order."""
    counts = asyncio.run(count_pending(database_url, list(scopes), prefix=prefix))
    rows = [{"scope": scope, "count": count} for scope, count in counts.items()]
    kit.Output(as_json).table(("scope", "count"), rows, header=False)


# -- the commands of other modules ------------------------------------------------------

statifier_oban.lazy(
    "worker",
    "statifier_oban.cli._worker:worker",
    help="Run oban queues (e.g. the timers queue) for a host until SIGINT/SIGTERM.",
)
statifier_oban.lazy(
    "demo",
    "statifier_demo._run:demo",
    help="A card authorization's hold timer survives a deploy (package statifier-demo).",
    needs=DEMO_MODULE,
    hint=f"{install_hint('statifier-demo')} (in the repository, uv sync installs it)",
)
statifier_oban.lazy(
    "db",
    "statifier_oban.cli._db:db",
    help="A local PostgreSQL that stays up until stopped (start, stop, status, url).",
)
statifier_oban.lazy(
    "executions",
    "statifier_oban.cli._executions:executions",
    help="List, show, step, cancel and migrate durable executions.",
    needs="statifier_persistence",
    hint=install_hint("statifier-oban", "persistence"),
)
statifier_oban.lazy(
    "web",
    "statifier_oban.cli._web:web",
    help="Serve the HTTP API and the web console over durable executions.",
    needs="statifier_web",
    hint=install_hint("statifier-oban", "web"),
)


# -- the options of commands that step executions ----------------------------------------

DEFAULT_TIMERS_QUEUE = "timers"
"""The queue new timers of executions go to unless ``--timers-queue`` says otherwise."""


def execution_options[F: Callable[..., Any]](function: F) -> F:
    """``--timers-queue``, ``--invoke-queue``, ``--handler`` (repeatable), ``--functions``,
    ``--path`` and ``--history/--no-history``: what a process stepping executions needs
    (``worker``, ``executions start``, ``send``, ``cancel``)."""
    options = [
        click.option(
            "--timers-queue",
            default=DEFAULT_TIMERS_QUEUE,
            show_default=True,
            metavar="NAME",
            envvar="STATIFIER_OBAN_TIMERS_QUEUE",
            show_envvar=True,
            help="queue of the timers executions arm",
        ),
        click.option(
            "--invoke-queue",
            default=None,
            metavar="NAME",
            envvar="STATIFIER_OBAN_INVOKE_QUEUE",
            show_envvar=True,
            help="queue of the invocations executions start (needed with --handler)",
        ),
        click.option(
            "--handler",
            "handlers",
            multiple=True,
            type=kit.Pair("TYPE=PATH", "myapp:capture=myapp.handlers:Capture"),
            envvar="STATIFIER_OBAN_HANDLERS",
            show_envvar=True,
            help="run <invoke type=TYPE> with the InvokeHandler class at import path PATH "
            "(repeatable)",
        ),
        kit.functions_option,
        kit.path_option,
        click.option(
            "--history/--no-history",
            default=True,
            show_default=True,
            envvar="STATIFIER_OBAN_HISTORY",
            show_envvar=True,
            help="write each change's history entry (every process stepping the executions "
            "should agree)",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function
