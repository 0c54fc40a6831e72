"""The ``statifier-oban`` command line.

Each subcommand is one :class:`Command` in the :data:`commands` registry: a function that
adds its arguments to its subparser and a function that runs it and returns the exit code.
Add a subcommand by writing those two functions and calling :func:`register`.

Subcommands:

``install``
    Install oban's schema plus the statifier_oban timer indexes
    (``statifier-oban install --database-url URL [--prefix P]``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from .schema import TIMER_DEDUP_INDEX, TIMER_PENDING_INDEX, SchemaError, check_prefix, describe
from .schema import install as install_schema

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
    """Install oban's schema and the timer indexes; print what was done; 1 on SchemaError."""
    url: str = args.database_url
    prefix: str = args.prefix
    try:
        asyncio.run(install_schema(url, prefix=prefix))
    except SchemaError as exc:
        print(f"{PROG} install: error: {exc}", file=sys.stderr)
        return 1
    print(
        f"installed oban tables and indexes {TIMER_DEDUP_INDEX}, {TIMER_PENDING_INDEX} "
        f"in schema {prefix!r} of {describe(url)}"
    )
    return 0


register(
    Command(
        name="install",
        help="install oban's schema and the statifier_oban timer indexes (idempotent)",
        add_arguments=add_install_arguments,
        run=install_command,
    )
)


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with one subparser per registered command."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="Durable SCXML timers as oban jobs on PostgreSQL."
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in commands.values():
        subparser = subparsers.add_parser(command.name, help=command.help)
        command.add_arguments(subparser)
        subparser.set_defaults(_run=command.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), run the subcommand, return its exit code.

    Usage errors exit with status 2 through argparse, as usual.
    """
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args._run
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
