"""``statifier-oban executions``: the operator's view of durable executions.

Imported only when the group is used, and only with statifier_persistence installed
(``statifier-oban[persistence]``; without it the group says so). ``list``, ``show``,
``start``, ``send`` and ``cancel`` are here; ``history``, ``wait`` and ``prune-history``
are ``statifier_oban.cli._history``'s, the revision commands (``revisions``,
``register``, ``migrate``, ``park``, ``unpark``, ``retire``) ``statifier_oban.cli.
_revisions``'s, and they join this group. ``start``, ``send`` and ``cancel`` step
executions as a worker does, so they take the same execution options (a step may arm
timers and start invocations); their changes are recorded in the history as the
``operator``'s.

Every command prints text, or with ``--json`` one JSON object per line, built on the one
record of an execution (``Execution.to_json``) and of a history entry
(``HistoryEntry.to_json``): ``list`` one execution record per execution, ``show`` the
execution record with its ``configuration``, ``datamodel``, ``timers``, ``invocations``
and ``fan_outs``, ``start``, ``send`` and ``cancel`` one answer (``{"result": "started" |
"stepped" | "cancelled" | "already_applied" | "discarded" | "declined", "execution":
{...}, ...}``; a step's answer adds ``configuration``, ``transition_taken``,
``unmatched`` and its history ``entry``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click
from oban import Oban
from statifier import Machine
from statifier.cli import kit
from statifier.core.events import Event
from statifier.core.state import MachineState
from statifier_persistence import (
    STATUSES,
    AlreadyApplied,
    Declined,
    Discarded,
    Execution,
    Executions,
    ExecutionStatus,
    PersistenceError,
    Stepped,
    Trigger,
    triggered_by,
)

from .._errors import StatifierObanError
from ..executions import ObanExecutor, pending_jobs
from . import _history, _revisions
from ._main import database_options, execution_options
from ._persistence import ExecutionOptions, find_revision, with_executions
from ._tracing import traced, tracing_options

SYSTEM_VARIABLES = frozenset({"_event", "_sessionid", "_name", "_ioprocessors"})
"""Datamodel entries ``show`` leaves out (the SCXML system variables)."""

LIST_COLUMNS = ("id", "status", "chart", "steps", "updated")
"""The columns of ``executions list``."""

SHOWN_CHILDREN = 50
"""The most children ``executions show`` lists (``executions list --parent`` pages them all)."""


@click.group(
    cls=kit.Group,
    errors=(PersistenceError, StatifierObanError),
    help="List, show, step, cancel and migrate durable executions.",
)
def executions() -> None:
    """The ``executions`` group."""


@executions.command("list", help="List executions (by status, chart, revision, metadata, parent).")
@database_options
@click.option("--status", type=click.Choice(STATUSES), default=None, help="only this status")
@click.option("--chart", default=None, metavar="NAME", help="only this chart's name")
@click.option(
    "--revision", default=None, metavar="REVISION",
    help="only executions running this chart revision (identity or unique prefix)",
)  # fmt: skip
@click.option(
    "--metadata", type=kit.JSON_OBJECT, default=None, metavar="JSON",
    help="only executions whose metadata contains this JSON object",
)  # fmt: skip
@click.option(
    "--parent", default=None, metavar="ID",
    help="only the children this execution's invocations started (invoked charts, fan-outs)",
)  # fmt: skip
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, metavar="N")
@click.option("--after", default=None, metavar="ID", help="the page after this id")
@kit.json_option
def list_executions(
    database_url: str,
    prefix: str,
    status: ExecutionStatus | None,
    chart: str | None,
    revision: str | None,
    metadata: dict[str, Any] | None,
    parent: str | None,
    limit: int,
    after: str | None,
    as_json: bool,
) -> None:
    """``executions list``: a page of executions; where the next page starts, on stderr."""
    output = kit.Output(as_json)

    async def work(executions: Executions, oban: Oban) -> None:
        identity = None
        if revision is not None:
            identity = (await find_revision(executions, revision)).identity
        page = await executions.list(
            status=status,
            chart=chart,
            revision=identity,
            metadata=metadata,
            parent=parent,
            limit=limit,
            after=after,
        )
        if as_json:
            for execution in page.executions:
                output.record_json(execution.to_json())
        else:
            rows = [
                {
                    "id": execution.id,
                    "status": execution.status,
                    "chart": execution.chart_name,
                    "steps": execution.step_count,
                    "updated": execution.updated_at,
                }
                for execution in page.executions
            ]
            output.table(LIST_COLUMNS, rows)
        if page.after is not None:
            output.note(f"more: --after {page.after}")

    with_executions(database_url, prefix, work)


@executions.command(
    help="Status, configuration, datamodel, pending jobs and children of an execution."
)
@database_options
@click.argument("execution_id", metavar="ID")
@kit.json_option
def show(database_url: str, prefix: str, execution_id: str, as_json: bool) -> None:
    """``executions show``: one record."""

    async def work(executions: Executions, oban: Oban) -> None:
        await _show(executions, oban, execution_id, kit.Output(as_json))

    with_executions(database_url, prefix, work)


async def _show(executions: Executions, oban: Oban, execution_id: str, output: kit.Output) -> None:
    execution, state = await executions.load(execution_id)
    jobs = await pending_jobs(oban, execution.id)
    now = datetime.now(UTC)
    datamodel = {k: v for k, v in state.datamodel.items() if k not in SYSTEM_VARIABLES}
    configuration = state.configuration_ids()
    timers: list[dict[str, Any]] = []
    for job in (j for j in jobs if j.kind == "timer"):
        due = job.scheduled_at.replace(tzinfo=UTC)
        timers.append(
            {
                "send_id": job.send_id,
                "event": job.event,
                "due": due,
                "in": kit.Duration(round((due - now).total_seconds() * 1000)),
                "job_id": job.job_id,
                "state": job.state,
            }
        )
    invocations: list[dict[str, Any]] = []
    for invoke_id in sorted(state.live_invocations()):
        running = [j for j in jobs if j.kind == "invocation" and j.invoke_id == invoke_id]
        invocations.append(
            {
                "invoke_id": invoke_id,
                "jobs": [{"job_id": j.job_id, "state": j.state} for j in running],
            }
        )
    fan_outs = [
        {
            "invoke_id": fan_out.key.invoke_id,
            "generation": fan_out.key.generation,
            "finished": fan_out.finished,
            "count": fan_out.count,
            "state": fan_out.state,
            "policy": fan_out.policy,
        }
        for fan_out in await executions.fan_outs(execution.id)
    ]
    page = await executions.list(parent=execution.id, limit=SHOWN_CHILDREN)
    children = page.executions
    parent = execution.parent
    metadata = dict(execution.metadata)
    data = {
        **execution.to_json(),
        "configuration": list(configuration),
        "datamodel": datamodel,
        "timers": timers,
        "invocations": invocations,
        "fan_outs": fan_outs,
        "children": [child.to_json() for child in children],
        "more_children": page.after is not None,
    }
    fields: list[tuple[str, object]] = [
        ("execution", execution.id),
        ("status", execution.status),
        ("chart", f"{execution.chart_name or '-'} ({execution.chart_identity})"),
        ("steps", f"{execution.step_count} (created {kit.text_of(execution.created_at)}, "
                  f"updated {kit.text_of(execution.updated_at)})"),
        ("history", f"{execution.history_seq} entries (executions history {execution.id})"),
        ("configuration", " ".join(configuration) or "-"),
        ("datamodel", datamodel),
        ("metadata", metadata),
    ]  # fmt: skip
    if execution.outcome is not None:
        fields.append(("outcome", dict(execution.outcome)))
    if execution.failure is not None:
        fields.append(("failure", dict(execution.failure)))
    if parent is not None:
        fields.append(("parent", f"{parent.execution_id} invoke {parent.invoke_id}"))
    for timer in timers:
        fields.append(
            ("timer", f"{kit.text_of(timer['send_id'])} -> {kit.text_of(timer['event'])} "
                      f"due {kit.text_of(timer['due'])} "
                      f"(in {kit.text_of(timer['in'])}), job {timer['job_id']} {timer['state']}")
        )  # fmt: skip
    for invocation in invocations:
        detail = (
            ", ".join(f"job {j['job_id']} {j['state']}" for j in invocation["jobs"])
            or "no pending job"
        )
        fields.append(("invocation", f"{invocation['invoke_id']} ({detail})"))
    for fan_out in fan_outs:
        fields.append(
            ("fan-out", f"{fan_out['invoke_id']} (generation {fan_out['generation']}): "
                        f"{fan_out['finished']} of {fan_out['count']} children finished, "
                        f"{fan_out['state']}, on {fan_out['policy']}")
        )  # fmt: skip
    for child in children:
        link = child.parent
        invoke = "-" if link is None else link.invoke_id
        place = f"[{link.index}]" if link is not None and link.index is not None else ""
        fields.append(
            ("child", f"{child.id} {child.status}, invoke {invoke}{place}, "
                      f"chart {child.chart_name or '-'}")
        )  # fmt: skip
    if page.after is not None:
        fields.append(("children", f"more: executions list --parent {execution.id}"))
    output.record(fields, data)


type Answer = Stepped | AlreadyApplied | Discarded | Declined

OPERATOR = "statifier-oban executions"
"""The ``detail`` of the history trigger of the changes these commands make."""


def operator(command: str) -> Trigger:
    """The history trigger of a change ``executions COMMAND`` makes."""
    return Trigger("operator", detail=f"{OPERATOR} {command}")


def _answer(result: Answer, what: str, output: kit.Output, *, strict: bool = False) -> int:
    """Print what a step did; 0 if it was applied (now or before), 1 if not (and, with
    ``strict``, if its event took no transition)."""
    match result:
        case Stepped(execution=execution, state=state):
            configuration = configuration_of(execution, state)
            if result.unmatched is not None and not output.as_json:
                output.note(f"notice: {result.unmatched}")
            output.line(
                f"{what}: {execution.id} is {execution.status} in {' '.join(configuration) or '-'}",
                {
                    "result": what,
                    "execution": execution.to_json(),
                    "configuration": list(configuration),
                    "transition_taken": result.transition_taken,
                    "unmatched": result.unmatched,
                    "entry": result.entry.to_json() if result.entry is not None else None,
                },
            )
            if strict and result.transition_taken is False:
                raise kit.CommandError(f"{result.unmatched} (--strict)")
            return 0
        case AlreadyApplied(execution=execution, key=key):
            output.line(
                f"already applied: key {key!r} was applied to {execution.id} before",
                {"result": "already_applied", "execution": execution.to_json(), "key": key},
            )
            return 0
        case Discarded(execution=execution, status=status):
            if output.as_json:
                output.record_json(
                    {"result": "discarded", "execution": execution.to_json(), "status": status}
                )
            else:
                output.note(f"discarded: {execution.id} is {status}")
            return 1
        case Declined(execution=execution, reason=reason):
            if output.as_json:
                output.record_json(
                    {"result": "declined", "execution": execution.to_json(), "reason": reason}
                )
            else:
                output.note(f"declined: {reason}")
            return 1


@executions.command(help="Step an event into an execution.")
@database_options
@execution_options
@click.argument("execution_id", metavar="ID")
@click.argument("event", metavar="EVENT")
@click.option("--data", type=kit.JSON, default=None, metavar="JSON", help="the event's data")
@click.option("--key", default=None, help="an idempotency key: applied at most once")
@click.option(
    "--strict", is_flag=True,
    help="fail (status 1) when the event takes no transition (a notice otherwise)",
)  # fmt: skip
@tracing_options
@kit.json_option
def send(
    database_url: str,
    prefix: str,
    timers_queue: str,
    invoke_queue: str | None,
    handlers: tuple[tuple[str, str], ...],
    functions: str | None,
    paths: tuple[str, ...],
    history: bool,
    execution_id: str,
    event: str,
    data: Any,
    key: str | None,
    strict: bool,
    otel: bool,
    traceparent: str | None,
    tracestate: str | None,
    baggage: str | None,
    as_json: bool,
) -> int:
    """``executions send``: refuses a chart whose invocations it could not start; says when
    the event took no transition (``--strict``: an error)."""
    kit.set_import_path(paths)
    options = ExecutionOptions(timers_queue, invoke_queue, handlers, functions, history)

    async def work(executions: Executions, oban: Oban) -> int:
        _, state = await executions.load(execution_id)
        _check_handlers(executions, execution_id, state.machine)
        with triggered_by(operator("send")):
            result = await executions.step(execution_id, Event(name=event, data=data), key=key)
        return _answer(result, "stepped", kit.Output(as_json), strict=strict)

    with traced(otel, traceparent, tracestate, baggage):
        return with_executions(database_url, prefix, work, options)


def _check_handlers(executions: Executions, execution_id: str, machine: Machine) -> None:
    """Refuse to step a chart whose invocations this command could not start."""
    executor = executions.executor
    assert isinstance(executor, ObanExecutor)  # noqa: S101 - executions_for makes one
    missing = executor.unhandled_invoke_types(machine)
    if missing:
        # Stepped here, an <invoke> of such a type would be a chart error and no job: the
        # execution would sit in the invoking state, never answered.
        raise kit.CommandError(
            f"{execution_id}'s chart invokes {', '.join(map(repr, missing))}, which this "
            "command has no handler for: give it the workers' --handler and --invoke-queue "
            "options, so that a step entering an invoking state starts the invocation"
        )


@executions.command(help="Start an execution of a registered chart (prints its id).")
@database_options
@execution_options
@click.argument("chart", metavar="CHART")
@click.option("--id", "execution_id", default=None, metavar="ID", help="its id (default: new)")
@click.option(
    "--revision", default=None, metavar="REVISION",
    help="this revision of CHART (identity or unique prefix; default: the newest not retired)",
)  # fmt: skip
@click.option(
    "--metadata", type=kit.JSON_OBJECT, default=None, metavar="JSON",
    help="the execution's metadata (a JSON object)",
)  # fmt: skip
@click.option("--event", default=None, metavar="NAME", help="an event to step at once")
@click.option("--data", type=kit.JSON, default=None, metavar="JSON", help="that event's data")
@click.option("--strict", is_flag=True, help="fail when --event takes no transition")
@tracing_options
@kit.json_option
def start(
    database_url: str,
    prefix: str,
    timers_queue: str,
    invoke_queue: str | None,
    handlers: tuple[tuple[str, str], ...],
    functions: str | None,
    paths: tuple[str, ...],
    history: bool,
    chart: str,
    execution_id: str | None,
    revision: str | None,
    metadata: dict[str, Any] | None,
    event: str | None,
    data: Any,
    strict: bool,
    otel: bool,
    traceparent: str | None,
    tracestate: str | None,
    baggage: str | None,
    as_json: bool,
) -> int:
    """``executions start``: create (and with ``--event``, step) in one transaction."""
    if data is not None and event is None:
        raise click.UsageError("--data is the data of --event: give --event NAME too")
    kit.set_import_path(paths)
    options = ExecutionOptions(timers_queue, invoke_queue, handlers, functions, history)
    output = kit.Output(as_json)

    async def work(executions: Executions, oban: Oban) -> int:
        target = chart
        if revision is not None:
            found = await find_revision(executions, revision)
            if found.name != chart:
                raise kit.CommandError(
                    f"revision {found.identity} is of chart {found.name!r}, not {chart!r}"
                )
            target = found.identity
        pool = executions.pool
        assert pool is not None  # noqa: S101 - with_executions builds it on a pool
        with triggered_by(operator("start")):
            async with pool.connection() as conn, conn.transaction():
                created = await executions.create(
                    target, execution_id=execution_id, metadata=metadata, conn=conn
                )
                _check_handlers(executions, created.execution.id, created.state.machine)
                stepped = None
                if event is not None:
                    new_id = created.execution.id
                    stepped = await executions.step(new_id, Event(name=event, data=data), conn=conn)
        return _started(created, stepped, output, strict=strict)

    with traced(otel, traceparent, tracestate, baggage):
        return with_executions(database_url, prefix, work, options)


def configuration_of(execution: Execution, state: MachineState) -> tuple[str, ...]:
    """The active state ids; for a finished execution, those active when it ended."""
    if execution.outcome is not None and not state.running:
        ended = execution.outcome.get("configuration")
        if isinstance(ended, list):
            return tuple(str(s) for s in ended)
    return state.configuration_ids()


def _started(created: Stepped, stepped: Answer | None, output: kit.Output, *, strict: bool) -> int:
    """Print the new execution's id (text), or its answer (JSON)."""
    last = stepped if isinstance(stepped, Stepped) else created
    execution = last.execution
    if last.unmatched is not None and not output.as_json:
        output.note(f"notice: {last.unmatched}")
    output.line(
        execution.id,
        {
            "result": "started",
            "execution": execution.to_json(),
            "configuration": list(configuration_of(execution, last.state)),
            "transition_taken": last.transition_taken,
            "unmatched": last.unmatched,
            "entries": [
                step.entry.to_json()
                for step in (created, stepped)
                if isinstance(step, Stepped) and step.entry is not None
            ],
        },
    )
    if strict and last.transition_taken is False:
        raise kit.CommandError(f"{last.unmatched} (--strict)")
    return 0 if stepped is None or isinstance(stepped, Stepped) else 1


@executions.command(help="Run an execution's cancel.")
@database_options
@execution_options
@click.argument("execution_id", metavar="ID")
@tracing_options
@kit.json_option
def cancel(
    database_url: str,
    prefix: str,
    timers_queue: str,
    invoke_queue: str | None,
    handlers: tuple[tuple[str, str], ...],
    functions: str | None,
    paths: tuple[str, ...],
    history: bool,
    execution_id: str,
    otel: bool,
    traceparent: str | None,
    tracestate: str | None,
    baggage: str | None,
    as_json: bool,
) -> int:
    """``executions cancel``."""
    kit.set_import_path(paths)
    options = ExecutionOptions(timers_queue, invoke_queue, handlers, functions, history)

    async def work(executions: Executions, oban: Oban) -> int:
        with triggered_by(operator("cancel")):
            result = await executions.cancel(execution_id)
        return _answer(result, "cancelled", kit.Output(as_json))

    with traced(otel, traceparent, tracestate, baggage):
        return with_executions(database_url, prefix, work, options)


for _command in (*_history.COMMANDS, *_revisions.COMMANDS):
    executions.add_command(_command)
