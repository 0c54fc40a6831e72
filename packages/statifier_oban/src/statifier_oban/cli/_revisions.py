"""The operator commands of chart revisions (imported only when statifier_persistence is).

Adds to ``statifier-oban executions``:

* ``revisions [--chart NAME]``: every registered revision, its executions by status;
* ``register FILE [--name N] [--version V]``: compile a chart file and register it as a
  revision (prints its identity);
* ``migrate --to REVISION (--revision REVISION | ID...) [--map OLD=NEW] [--datamodel JSON]``:
  move executions to another revision (every active or parked one of ``--revision``, or
  the ids given);
* ``park``/``unpark (--revision REVISION | ID...)``: park executions (they take no event,
  their timers snooze) or make them active again;
* ``retire REVISION``: retire a revision once no execution and no pending timer needs it.

Each takes ``--dry-run``: it prints what would move or be refused, and changes nothing.
A REVISION is a chart identity, the identity of its source bytes, or a unique prefix of
either. Any refusal makes the status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import statifier
from oban import Oban
from statifier_persistence import (
    Bulk,
    Executions,
    RetirementRefused,
)

from ..executions import TimerPins, execution_config
from . import _executions as executions_cli
from . import _main

PAGE = 500
"""Executions per bulk call (a page; the command goes on until none is left)."""


# -- arguments ---------------------------------------------------------------------------


def _mapping_argument(value: str) -> tuple[str, str]:
    """argparse ``type=`` for ``--map OLD=NEW``."""
    old, sep, new = value.partition("=")
    if not sep or not old or not new:
        raise argparse.ArgumentTypeError(f"expected OLD=NEW (a state id each), not {value!r}")
    return old, new


def _targets(parser: argparse.ArgumentParser) -> None:
    """``--revision REVISION`` or execution ids (one of them), and ``--dry-run``."""
    parser.add_argument(
        "--revision",
        default=None,
        metavar="REVISION",
        help="every execution of this revision (identity or a unique prefix)",
    )
    parser.add_argument("execution_ids", nargs="*", metavar="ID", help="these executions")
    parser.add_argument("--dry-run", action="store_true", help="print what would happen, only")


def add_revision_actions(actions: Any) -> None:
    """The revision subcommands of ``executions`` (see the module docstring)."""
    listing = actions.add_parser("revisions", help="list chart revisions and their executions")
    _main.add_install_arguments(listing)
    listing.add_argument("--chart", default=None, metavar="NAME", help="the chart's name")
    listing.add_argument("--limit", type=int, default=100, metavar="N", help="at most N (100)")
    register = actions.add_parser("register", help="register a chart file as a revision")
    _main.add_install_arguments(register)
    register.add_argument("file", type=Path, metavar="FILE", help="the chart's SCXML source")
    register.add_argument("--name", default=None, help="compile-time name (part of the identity)")
    register.add_argument("--version", default=None, help="version (part of the identity)")
    executions_cli.add_functions_option(register)
    migrate = actions.add_parser("migrate", help="move executions to another chart revision")
    _main.add_install_arguments(migrate)
    migrate.add_argument("--to", required=True, metavar="REVISION", help="the revision to run")
    executions_cli.add_functions_option(migrate)
    migrate.add_argument(
        "--map", action="append", default=[], type=_mapping_argument, metavar="OLD=NEW",
        help="a renamed state: old id, new id (repeatable)",
    )  # fmt: skip
    migrate.add_argument(
        "--datamodel", type=executions_cli._json_argument, default=None, metavar="JSON",
        help="variables to set, as a JSON object",
    )  # fmt: skip
    _targets(migrate)
    for name, help_text in (
        ("park", "park executions: no event, timers snooze, until unpark"),
        ("unpark", "make parked executions active again"),
    ):
        parked = actions.add_parser(name, help=help_text)
        _main.add_install_arguments(parked)
        _targets(parked)
    retire = actions.add_parser("retire", help="retire a revision nothing needs any more")
    _main.add_install_arguments(retire)
    retire.add_argument("revision", metavar="REVISION")
    retire.add_argument("--dry-run", action="store_true", help="print what pins it, only")


# -- the actions -------------------------------------------------------------------------


def _counts(counts: Any) -> str:
    return " ".join(f"{status}={n}" for status, n in sorted(counts.items())) or "-"


async def _revisions(executions: Executions, oban: Oban, args: argparse.Namespace) -> int:
    found = await executions.revisions(name=args.chart, limit=args.limit)
    print("identity\tname\tversion\tregistered\tretired\texecutions")
    for r in found:
        retired = executions_cli._when(r.retired_at) if r.retired_at else "-"
        print(
            f"{r.identity}\t{r.name or '-'}\t{r.version or '-'}"
            f"\t{executions_cli._when(r.registered_at)}\t{retired}\t{_counts(r.executions)}"
        )
    return 0


async def _register(executions: Executions, oban: Oban, args: argparse.Namespace) -> int:
    limit = executions.limits.max_chart_source_bytes
    try:
        with args.file.open("rb") as file:
            source = file.read(limit + 1)  # the registry takes no more: never read on
    except OSError as exc:
        raise _main.CommandError(f"cannot read {args.file}: {exc.strerror or exc}") from None
    if len(source) > limit:
        raise _main.CommandError(f"{args.file} is over the {limit} bytes a chart's source may hold")
    try:
        machine = statifier.compile(
            source,
            name=args.name,
            version=args.version,
            functions=executions_cli.host_functions_of(args),
        )
    except statifier.ChartError as exc:
        raise _main.CommandError(f"{args.file}: {exc}") from None
    print(f"registered: {await executions.register(machine)}")
    return 0


async def _migrate(executions: Executions, oban: Oban, args: argparse.Namespace) -> int:
    target = (await executions_cli.find_revision(executions, args.to)).identity
    if args.datamodel is not None and not isinstance(args.datamodel, dict):
        raise _main.CommandError("--datamodel must be a JSON object")
    options: dict[str, Any] = {
        "state_map": dict(args.map),
        "datamodel": args.datamodel,
        "dry_run": args.dry_run,
    }

    async def page(identity: str, after: str | None) -> Bulk:
        return await executions.migrate_all(identity, target, limit=PAGE, after=after, **options)

    async def given(ids: list[str]) -> Bulk:
        return await executions.migrate_many(ids, target, **options)

    return await _bulk(executions, args, ("moved", "would move"), page, given)


async def _park(executions: Executions, oban: Oban, args: argparse.Namespace) -> int:
    return await _set_status(executions, args, park=True)


async def _unpark(executions: Executions, oban: Oban, args: argparse.Namespace) -> int:
    return await _set_status(executions, args, park=False)


async def _set_status(executions: Executions, args: argparse.Namespace, *, park: bool) -> int:
    every = executions.park_all if park else executions.unpark_all
    each = executions.park_many if park else executions.unpark_many
    words = ("parked", "would park") if park else ("unparked", "would unpark")

    async def page(identity: str, after: str | None) -> Bulk:
        return await every(identity, dry_run=args.dry_run, limit=PAGE, after=after)

    async def given(ids: list[str]) -> Bulk:
        return await each(ids, dry_run=args.dry_run)

    return await _bulk(executions, args, words, page, given)


async def _bulk(
    executions: Executions,
    args: argparse.Namespace,
    words: tuple[str, str],
    page: Callable[[str, str | None], Awaitable[Bulk]],
    given: Callable[[list[str]], Awaitable[Bulk]],
) -> int:
    """Run a bulk action over ``--revision`` (page by page) or the ids given; print one
    line per execution and a summary; 1 if any was refused."""
    if (args.revision is None) == (not args.execution_ids):
        raise _main.CommandError("give either --revision REVISION or execution ids")
    word = words[1] if args.dry_run else words[0]
    done = refused = 0

    def report(result: Bulk) -> None:
        nonlocal done, refused
        for execution_id in result.done:
            print(f"{word}: {execution_id}", flush=True)
        for execution_id, reason in result.refused:
            print(f"refused: {execution_id}: {' '.join(reason.split())}", flush=True)
        done += len(result.done)
        refused += len(result.refused)

    if args.revision is None:
        report(await given(args.execution_ids))
    else:
        identity = (await executions_cli.find_revision(executions, args.revision)).identity
        after: str | None = None
        while True:
            result = await page(identity, after)
            report(result)
            if result.after is None:
                break
            after = result.after
    print(f"{done} {word}, {refused} refused", file=sys.stderr)
    return 1 if refused else 0


async def _retire(executions: Executions, oban: Oban, args: argparse.Namespace) -> int:
    revision = await executions_cli.find_revision(executions, args.revision)
    timers = TimerPins(execution_config(oban, timers_queue=args.timers_queue))
    if args.dry_run:
        report = await executions.pins(revision.identity, pin_sources=[timers])
        print(json.dumps(report.counts, sort_keys=True))
        if report.pinned:
            print(f"would be refused: {report.describe()}", file=sys.stderr)
            return 1
        print(f"would retire: {revision.identity}")
        return 0
    try:
        retired = await executions.retire(revision.identity, pin_sources=[timers])
    except RetirementRefused as exc:
        print(json.dumps(exc.pins.counts, sort_keys=True))
        print(f"refused: {exc.pins.describe()}", file=sys.stderr)
        return 1
    print(f"retired: {retired.identity}")
    return 0


REVISION_ACTIONS: dict[str, executions_cli.Action] = {
    "revisions": _revisions,
    "register": _register,
    "migrate": _migrate,
    "park": _park,
    "unpark": _unpark,
    "retire": _retire,
}

executions_cli.ACTION_PARSERS.append(add_revision_actions)
executions_cli.ACTIONS.update(REVISION_ACTIONS)
