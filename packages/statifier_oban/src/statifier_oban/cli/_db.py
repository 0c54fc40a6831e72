"""``statifier-oban db``: a local PostgreSQL that stays up, for trying things and developing.

* ``db start [--data-dir DIR]``: start the embedded server of the data directory
  (creating it the first time), install the schema (what ``statifier-oban install``
  installs) into its ``statifier`` database, and print ``export DATABASE_URL=...`` on
  stdout, so that ``eval "$(statifier-oban db start)"`` points every later command at it.
  The server keeps running after the command ends, until ``db stop``.
* ``db stop``: stop it (the data stays); ``db status``: whether it runs (status 1 if
  not); ``db url``: its URL alone (for ``DATABASE_URL=$(statifier-oban db url)``).

The data directory defaults to the user's data directory
(``statifier_oban.embedded.default_data_root()``; ``$STATIFIER_OBAN_DB_DIR`` sets another).
Needs the ``embedded`` extra, and says so.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from statifier.cli import kit

from .._errors import StatifierObanError
from ..embedded import KeptPostgres, KeptPostgresError
from ..store._schema import install as install_schema


@click.group(
    cls=kit.Group,
    errors=(StatifierObanError,),
    help="A local PostgreSQL that stays up until stopped (start, stop, status, url).",
)
def db() -> None:
    """The ``db`` group."""


def data_dir_option[F: Callable[..., Any]](function: F) -> F:
    """``--data-dir DIR`` (``$STATIFIER_OBAN_DB_DIR``): where the server keeps its data."""
    return click.option(
        "--data-dir",
        "data_dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        metavar="DIR",
        envvar="STATIFIER_OBAN_DB_DIR",
        show_envvar=True,
        help="the folder of the server's data (default: statifier/postgres in the user's "
        "data directory)",
    )(function)


@db.command(help="Start the local PostgreSQL (created the first time) and print its URL.")
@data_dir_option
@kit.json_option
def start(data_dir: Path | None, as_json: bool) -> None:
    """``db start``: the URL as a shell assignment on stdout, what happened on stderr."""
    server = KeptPostgres(data_dir)
    was_running = server.running()
    url = server.start()
    asyncio.run(install_schema(url))
    output = kit.Output(as_json)
    if not as_json:
        done = "runs" if was_running else "started"
        output.note(
            f"PostgreSQL {done} in {server.data_dir}, schema installed; "
            "stop it with: statifier-oban db stop"
        )
    output.line(
        f"export DATABASE_URL={shlex.quote(url)}",
        {"running": True, "url": url, "data_dir": str(server.data_dir)},
    )


@db.command(help="Stop the local PostgreSQL (its data stays).")
@data_dir_option
@kit.json_option
def stop(data_dir: Path | None, as_json: bool) -> None:
    """``db stop``: stopping a stopped server is no error."""
    server = KeptPostgres(data_dir)
    stopped = server.stop()
    kit.Output(as_json).line(
        f"{'stopped' if stopped else 'not running'}: {server.data_dir}",
        {"stopped": stopped, "data_dir": str(server.data_dir)},
    )


@db.command(help="Whether the local PostgreSQL runs (status 1 if it does not).")
@data_dir_option
@kit.json_option
def status(data_dir: Path | None, as_json: bool) -> int:
    """``db status``."""
    server = KeptPostgres(data_dir)
    url = server.url()
    kit.Output(as_json).line(
        f"running: {server.data_dir} ({url})" if url else f"stopped: {server.data_dir}",
        {"running": url is not None, "url": url, "data_dir": str(server.data_dir)},
    )
    return 0 if url is not None else 1


@db.command(help="Print the URL of the running local PostgreSQL.")
@data_dir_option
def url(data_dir: Path | None) -> None:
    """``db url``: an error if the server does not run."""
    server = KeptPostgres(data_dir)
    found = server.url()
    if found is None:
        raise KeptPostgresError(
            f"no server runs in {server.data_dir}: start it with statifier-oban db start"
        )
    click.echo(found)
