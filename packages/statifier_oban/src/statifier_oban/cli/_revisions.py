"""The operator commands of chart revisions, in ``statifier-oban executions``.

* ``revisions [--chart NAME]``: every registered revision, its executions by status;
* ``register FILE [--name N] [--version V]``: compile a chart file and register it as a
  revision (prints its identity);
* ``migrate --to REVISION (--revision REVISION | ID...) [--map OLD=NEW] [--datamodel JSON]``:
  move executions to another revision (every active or parked one of ``--revision``, or
  the ids given);
* ``park``/``unpark (--revision REVISION | ID...)``: park executions (they take no event,
  their timers snooze) or make them active again;
* ``retire REVISION``: retire a revision once no execution and no pending timer needs it.

Each bulk command and ``retire`` take ``--dry-run``: they print what would move or be
refused, and change nothing. A REVISION is a chart identity, the identity of its source
bytes, or a unique prefix of either. Any refusal makes the status 1. With ``--json``,
``revisions`` prints one object per revision, a bulk command one per execution
(``{"execution", "result", "reason"?}``), ``register`` and ``retire`` one record.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import click
import statifier
from oban import Oban
from statifier.cli import kit
from statifier_persistence import Bulk, Executions, RetirementRefused

from ..executions import TimerPins, execution_config
from ._main import DEFAULT_TIMERS_QUEUE, database_options
from ._persistence import ExecutionOptions, find_revision, with_executions
from ._tracing import traced, tracing_options

PAGE = 500
"""Executions per bulk call (a page; the command goes on until none is left)."""

REVISION_COLUMNS = ("identity", "name", "version", "registered", "retired", "executions")
"""The columns of ``executions revisions``."""


def _counts(counts: Any) -> str:
    return " ".join(f"{status}={n}" for status, n in sorted(counts.items())) or "-"


@click.command(cls=kit.Command, help="List chart revisions and their executions.")
@database_options
@click.option("--chart", default=None, metavar="NAME", help="the chart's name")
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True, metavar="N")
@kit.json_option
def revisions(database_url: str, prefix: str, chart: str | None, limit: int, as_json: bool) -> None:
    """``executions revisions``."""
    output = kit.Output(as_json)

    async def work(executions: Executions, oban: Oban) -> None:
        found = await executions.revisions(name=chart, limit=limit)
        rows = [
            {
                "identity": r.identity,
                "name": r.name,
                "version": r.version,
                "registered": r.registered_at,
                "retired": r.retired_at,
                "executions": dict(r.executions) if as_json else _counts(r.executions),
            }
            for r in found
        ]
        output.table(REVISION_COLUMNS, rows)

    with_executions(database_url, prefix, work)


@click.command(cls=kit.Command, help="Register a chart file as a revision.")
@database_options
@click.argument("file", type=click.Path(path_type=Path), metavar="FILE")
@click.option("--name", default=None, help="compile-time name (part of the identity)")
@click.option("--version", default=None, help="version (part of the identity)")
@kit.functions_option
@kit.path_option
@kit.json_option
def register(
    database_url: str,
    prefix: str,
    file: Path,
    name: str | None,
    version: str | None,
    functions: str | None,
    paths: tuple[str, ...],
    as_json: bool,
) -> None:
    """``executions register``: reads no more of the file than a chart's source may hold."""
    kit.set_import_path(paths)
    loaded = kit.load_functions(functions)

    async def work(executions: Executions, oban: Oban) -> None:
        limit = executions.limits.max_chart_source_bytes
        try:
            with file.open("rb") as handle:
                source = handle.read(limit + 1)  # the registry takes no more: never read on
        except OSError as exc:
            raise kit.CommandError(f"cannot read {file}: {exc.strerror or exc}") from None
        if len(source) > limit:
            raise kit.CommandError(f"{file} is over the {limit} bytes a chart's source may hold")
        try:
            machine = statifier.compile(source, name=name, version=version, functions=loaded)
        except statifier.ChartError as exc:
            raise kit.CommandError(f"{file}: {exc}") from None
        identity = await executions.register(machine)
        kit.Output(as_json).line(f"registered: {identity}", {"registered": identity})

    with_executions(database_url, prefix, work, ExecutionOptions(functions=functions))


def _targets[F: Callable[..., Any]](function: F) -> F:
    """``--revision REVISION`` or execution ids (one of them), and ``--dry-run``."""
    revision = click.option(
        "--revision",
        default=None,
        metavar="REVISION",
        help="every execution of this revision (identity or a unique prefix)",
    )
    ids = click.argument("execution_ids", nargs=-1, metavar="[ID]...")
    dry_run = click.option("--dry-run", is_flag=True, help="print what would happen, only")
    return revision(ids(dry_run(kit.json_option(function))))


type Page = Callable[[str, str | None], Awaitable[Bulk]]
type Given = Callable[[list[str]], Awaitable[Bulk]]


async def _bulk(
    executions: Executions,
    revision: str | None,
    execution_ids: tuple[str, ...],
    dry_run: bool,
    words: tuple[str, str],
    page: Page,
    given: Given,
    output: kit.Output,
) -> int:
    """Run a bulk action over ``--revision`` (page by page) or the ids given; print one
    line per execution and a summary; 1 if any was refused."""
    if (revision is None) == (not execution_ids):
        raise kit.CommandError("give either --revision REVISION or execution ids")
    word = words[1] if dry_run else words[0]
    done = refused = 0

    def report(result: Bulk) -> None:
        nonlocal done, refused
        for execution_id in result.done:
            output.line(f"{word}: {execution_id}", {"execution": execution_id, "result": word})
        for execution_id, reason in result.refused:
            text = " ".join(reason.split())
            output.line(
                f"refused: {execution_id}: {text}",
                {"execution": execution_id, "result": "refused", "reason": text},
            )
        done += len(result.done)
        refused += len(result.refused)

    if revision is None:
        report(await given(list(execution_ids)))
    else:
        identity = (await find_revision(executions, revision)).identity
        after: str | None = None
        while True:
            result = await page(identity, after)
            report(result)
            if result.after is None:
                break
            after = result.after
    output.note(f"{done} {word}, {refused} refused")
    return 1 if refused else 0


@click.command(cls=kit.Command, help="Move executions to another chart revision.")
@database_options
@click.option("--to", "to", required=True, metavar="REVISION", help="the revision to run")
@click.option(
    "--map", "mapping", multiple=True, type=kit.Pair("OLD=NEW", "waiting=pending"),
    help="a renamed state: old id, new id (repeatable)",
)  # fmt: skip
@click.option(
    "--datamodel", type=kit.JSON_OBJECT, default=None, metavar="JSON",
    help="variables to set, as a JSON object",
)  # fmt: skip
@kit.functions_option
@kit.path_option
@tracing_options
@_targets
def migrate(
    database_url: str,
    prefix: str,
    to: str,
    mapping: tuple[tuple[str, str], ...],
    datamodel: dict[str, Any] | None,
    functions: str | None,
    paths: tuple[str, ...],
    otel: bool,
    traceparent: str | None,
    tracestate: str | None,
    baggage: str | None,
    revision: str | None,
    execution_ids: tuple[str, ...],
    dry_run: bool,
    as_json: bool,
) -> int:
    """``executions migrate``."""
    kit.set_import_path(paths)
    kit.load_functions(functions)  # refused here, before any execution moves

    async def work(executions: Executions, oban: Oban) -> int:
        target = (await find_revision(executions, to)).identity
        options: dict[str, Any] = {
            "state_map": dict(mapping),
            "datamodel": datamodel,
            "dry_run": dry_run,
        }

        async def page(identity: str, after: str | None) -> Bulk:
            return await executions.migrate_all(
                identity, target, limit=PAGE, after=after, **options
            )

        async def given(ids: list[str]) -> Bulk:
            return await executions.migrate_many(ids, target, **options)

        words = ("moved", "would move")
        return await _bulk(
            executions, revision, execution_ids, dry_run, words, page, given, kit.Output(as_json)
        )

    with traced(otel, traceparent, tracestate, baggage):
        return with_executions(database_url, prefix, work, ExecutionOptions(functions=functions))


def _status_command(name: str, help_text: str, *, park: bool) -> click.Command:
    """``park`` or ``unpark``."""

    @click.command(name, cls=kit.Command, help=help_text)
    @database_options
    @_targets
    def command(
        database_url: str,
        prefix: str,
        revision: str | None,
        execution_ids: tuple[str, ...],
        dry_run: bool,
        as_json: bool,
    ) -> int:
        async def work(executions: Executions, oban: Oban) -> int:
            every = executions.park_all if park else executions.unpark_all
            each = executions.park_many if park else executions.unpark_many

            async def page(identity: str, after: str | None) -> Bulk:
                return await every(identity, dry_run=dry_run, limit=PAGE, after=after)

            async def given(ids: list[str]) -> Bulk:
                return await each(ids, dry_run=dry_run)

            words = ("parked", "would park") if park else ("unparked", "would unpark")
            output = kit.Output(as_json)
            return await _bulk(
                executions, revision, execution_ids, dry_run, words, page, given, output
            )

        return with_executions(database_url, prefix, work)

    return command


park = _status_command("park", "Park executions: no event, timers snooze, until unpark.", park=True)
unpark = _status_command("unpark", "Make parked executions active again.", park=False)


@click.command(cls=kit.Command, help="Retire a revision nothing needs any more.")
@database_options
@click.argument("revision", metavar="REVISION")
@click.option("--dry-run", is_flag=True, help="print what pins it, only")
@kit.json_option
def retire(database_url: str, prefix: str, revision: str, dry_run: bool, as_json: bool) -> int:
    """``executions retire``: refused while an execution or a pending timer needs it."""
    output = kit.Output(as_json)

    async def work(executions: Executions, oban: Oban) -> int:
        found = await find_revision(executions, revision)
        timers = TimerPins(execution_config(oban, timers_queue=DEFAULT_TIMERS_QUEUE))
        if dry_run:
            report = await executions.pins(found.identity, pin_sources=[timers])
            if report.pinned:
                _refusal(output, found.identity, "would be refused", report)
                return 1
            _pins(output, report.counts)
            output.line(
                f"would retire: {found.identity}",
                {"revision": found.identity, "result": "would retire", "pins": report.counts},
            )
            return 0
        try:
            retired = await executions.retire(found.identity, pin_sources=[timers])
        except RetirementRefused as exc:
            _refusal(output, found.identity, "refused", exc.pins)
            return 1
        output.line(
            f"retired: {retired.identity}", {"revision": retired.identity, "result": "retired"}
        )
        return 0

    return with_executions(database_url, prefix, work)


def _pins(output: kit.Output, counts: Any) -> None:
    """Text mode: the pins as one JSON line (JSON mode has them in the record)."""
    if not output.as_json:
        output.line(kit.text_of(dict(counts)))


def _refusal(output: kit.Output, identity: str, result: str, pins: Any) -> None:
    """A retirement refused (or that would be): what pins the revision, and why."""
    if output.as_json:
        output.record_json({"revision": identity, "result": result, "pins": dict(pins.counts)})
    else:
        _pins(output, pins.counts)
    output.note(f"{result}: {pins.describe()}")


COMMANDS = (revisions, register, migrate, park, unpark, retire)
"""The commands this module adds to ``executions``."""
