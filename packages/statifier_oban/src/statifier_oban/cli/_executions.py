"""``statifier-oban executions``: the operator's view of durable executions.

Imported only when the group is used, and only with statifier_persistence installed
(``statifier-oban[persistence]``; without it the group says so). ``list``, ``show``,
``send`` and ``cancel`` are here; the revision commands (``revisions``, ``register``,
``migrate``, ``park``, ``unpark``, ``retire``) are ``statifier_oban.cli._revisions``'s and
join this group. ``send`` and ``cancel`` step executions as a worker does, so they take
the same execution options (a step may arm timers and start invocations).

Every command prints text, or with ``--json`` one JSON object per line: ``list`` one per
execution (the columns of its table), ``show`` one record, ``send`` and ``cancel`` one
answer (``{"result": "stepped" | "cancelled" | "already_applied" | "discarded" |
"declined", "execution", ...}``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click
from oban import Oban
from statifier import Machine
from statifier.cli import kit
from statifier.core import planner
from statifier.core.events import Event
from statifier_persistence import (
    STATUSES,
    AlreadyApplied,
    Declined,
    Discarded,
    Executions,
    ExecutionStatus,
    PersistenceError,
    Stepped,
)

from .._errors import StatifierObanError
from ..executions import pending_jobs
from . import _revisions
from ._main import database_options, execution_options
from ._persistence import ExecutionOptions, find_revision, with_executions
from ._tracing import traced, tracing_options

SYSTEM_VARIABLES = frozenset({"_event", "_sessionid", "_name", "_ioprocessors"})
"""Datamodel entries ``show`` leaves out (the SCXML system variables)."""

LIST_COLUMNS = ("id", "status", "chart", "steps", "updated")
"""The columns of ``executions list``."""


@click.group(
    cls=kit.Group,
    errors=(PersistenceError, StatifierObanError),
    help="List, show, step, cancel and migrate durable executions.",
)
def executions() -> None:
    """The ``executions`` group."""


@executions.command("list", help="List executions (by status, chart, revision, metadata).")
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
            limit=limit,
            after=after,
        )
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


@executions.command(help="Status, configuration, datamodel, pending jobs of an execution.")
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
    parent = execution.parent
    metadata = dict(execution.metadata)
    data = {
        "execution": execution.id,
        "status": execution.status,
        "chart": {"name": execution.chart_name, "identity": execution.chart_identity},
        "steps": execution.step_count,
        "created": execution.created_at,
        "updated": execution.updated_at,
        "configuration": list(configuration),
        "datamodel": datamodel,
        "metadata": metadata,
        "outcome": None if execution.outcome is None else dict(execution.outcome),
        "failure": None if execution.failure is None else dict(execution.failure),
        "parent": None
        if parent is None
        else {"execution": parent.execution_id, "invoke_id": parent.invoke_id},
        "timers": timers,
        "invocations": invocations,
        "fan_outs": fan_outs,
    }
    fields: list[tuple[str, object]] = [
        ("execution", execution.id),
        ("status", execution.status),
        ("chart", f"{execution.chart_name or '-'} ({execution.chart_identity})"),
        ("steps", f"{execution.step_count} (created {kit.text_of(execution.created_at)}, "
                  f"updated {kit.text_of(execution.updated_at)})"),
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
            ("timer", f"{timer['send_id']} -> {timer['event']} due {kit.text_of(timer['due'])} "
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
    output.record(fields, data)


type Answer = Stepped | AlreadyApplied | Discarded | Declined


def _answer(result: Answer, what: str, output: kit.Output) -> int:
    """Print what a step did; 0 if it was applied (now or before), 1 if not."""
    match result:
        case Stepped(execution=execution, state=state):
            configuration = state.configuration_ids()
            output.line(
                f"{what}: {execution.id} is {execution.status} in {' '.join(configuration) or '-'}",
                {
                    "result": what,
                    "execution": execution.id,
                    "status": execution.status,
                    "configuration": list(configuration),
                },
            )
            return 0
        case AlreadyApplied(execution=execution, key=key):
            output.line(
                f"already applied: key {key!r} was applied to {execution.id} before",
                {"result": "already_applied", "execution": execution.id, "key": key},
            )
            return 0
        case Discarded(execution=execution, status=status):
            if output.as_json:
                output.record_json(
                    {"result": "discarded", "execution": execution.id, "status": status}
                )
            else:
                output.note(f"discarded: {execution.id} is {status}")
            return 1
        case Declined(execution=execution, reason=reason):
            if output.as_json:
                output.record_json(
                    {"result": "declined", "execution": execution.id, "reason": reason}
                )
            else:
                output.note(f"declined: {reason}")
            return 1


def invoke_types(machine: Machine) -> set[str]:
    """The invoke types a chart names in ``type`` attributes (not the SCXML ones, which
    need no handler; a ``typeexpr`` is known only when it runs)."""
    return {
        invoke.type
        for state in machine.states
        for invoke in state.invokes
        if invoke.type is not None and invoke.type not in planner.SCXML_INVOKE_TYPES
    }


@executions.command(help="Step an event into an execution.")
@database_options
@execution_options
@click.argument("execution_id", metavar="ID")
@click.argument("event", metavar="EVENT")
@click.option("--data", type=kit.JSON, default=None, metavar="JSON", help="the event's data")
@click.option("--key", default=None, help="an idempotency key: applied at most once")
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
    execution_id: str,
    event: str,
    data: Any,
    key: str | None,
    otel: bool,
    traceparent: str | None,
    tracestate: str | None,
    as_json: bool,
) -> int:
    """``executions send``: refuses a chart whose invocations it could not start."""
    kit.set_import_path(paths)
    options = ExecutionOptions(timers_queue, invoke_queue, handlers, functions)

    async def work(executions: Executions, oban: Oban) -> int:
        _, state = await executions.load(execution_id)
        known = set(executions.executor.invoke_types or ())
        missing = sorted(invoke_types(state.machine) - known)
        if missing:
            # Stepped here, an <invoke> of such a type would be a chart error and no job:
            # the execution would sit in the invoking state, never answered.
            raise kit.CommandError(
                f"{execution_id}'s chart invokes {', '.join(map(repr, missing))}, which this "
                "command has no handler for: give it the workers' --handler and "
                "--invoke-queue options, so that a step entering an invoking state starts "
                "the invocation"
            )
        result = await executions.step(execution_id, Event(name=event, data=data), key=key)
        return _answer(result, "stepped", kit.Output(as_json))

    with traced(otel, traceparent, tracestate):
        return with_executions(database_url, prefix, work, options)


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
    execution_id: str,
    otel: bool,
    traceparent: str | None,
    tracestate: str | None,
    as_json: bool,
) -> int:
    """``executions cancel``."""
    kit.set_import_path(paths)
    options = ExecutionOptions(timers_queue, invoke_queue, handlers, functions)

    async def work(executions: Executions, oban: Oban) -> int:
        return _answer(await executions.cancel(execution_id), "cancelled", kit.Output(as_json))

    with traced(otel, traceparent, tracestate):
        return with_executions(database_url, prefix, work, options)


for _command in _revisions.COMMANDS:
    executions.add_command(_command)
