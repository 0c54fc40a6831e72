"""The command line of durable executions (imported only when statifier_persistence is).

Registers, in ``statifier_oban.cli``'s registry:

* ``worker`` again, with the execution options: the worker delivers fired timers and
  invocation answers into executions (``statifier_oban.executions.use``), and the timers
  and invocations their steps arm go to ``--timers-queue`` and ``--invoke-queue``, with
  ``--handler TYPE=PATH`` registering invoke handlers and ``--functions MODULE:NAME``
  naming the host functions the charts are compiled with;
* ``executions list|show|send|cancel``: the operator's view of executions (the revision
  commands, ``revisions|register|migrate|park|unpark|retire``, are
  ``statifier_oban.cli._revisions``'s).

``send`` and ``cancel`` step executions as a worker does, so they take the same execution
options (a step may arm timers and start invocations).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier import Machine
from statifier.core import planner
from statifier.core.events import Event
from statifier.datamodel.host import HostFunctionError, HostFunctions, import_functions
from statifier_persistence import (
    STATUSES,
    AlreadyApplied,
    ChartNotRegistered,
    Declined,
    Discarded,
    Executions,
    PersistenceError,
    Revision,
    Stepped,
)

from .._errors import ResolutionError, StatifierObanError
from ..executions import ObanExecutor, execution_config, pending_jobs, use
from ..invocations._handler import InvokeHandler
from ..rows._resolve import locate
from ..store._schema import OBAN_TABLES
from . import _main

DEFAULT_TIMERS_QUEUE = "timers"
"""The queue new timers of executions go to unless ``--timers-queue`` says otherwise."""

POSITION_KEY_ENV = "STATIFIER_POSITION_KEY"
"""The environment variable holding the position key (UTF-8, at least 16 bytes), when the
host stores its positions with one (``Executions(position_key=...)``)."""

SYSTEM_VARIABLES = frozenset({"_event", "_sessionid", "_name", "_ioprocessors"})
"""Datamodel entries ``show`` leaves out (the SCXML system variables)."""

# -- execution options ------------------------------------------------------------------


def _handler_argument(value: str) -> tuple[str, str]:
    """argparse ``type=`` for ``--handler TYPE=PATH``."""
    invoke_type, sep, path = value.partition("=")
    if not sep or not invoke_type or not path:
        raise argparse.ArgumentTypeError(
            f"expected TYPE=PATH (e.g. myapp:capture=myapp.handlers:Capture), not {value!r}"
        )
    return invoke_type, path


def add_functions_option(parser: argparse.ArgumentParser) -> None:
    """``--functions MODULE:NAME``: the host functions registered charts are compiled with."""
    parser.add_argument(
        "--functions",
        default=None,
        metavar="MODULE:NAME",
        help="a mapping of host functions the executions' charts call, e.g. "
        "myapp.rules:FUNCTIONS (every process stepping them needs the same)",
    )


def add_execution_options(parser: argparse.ArgumentParser) -> None:
    """``--timers-queue``, ``--invoke-queue``, ``--handler`` (repeatable) and
    ``--functions``."""
    add_functions_option(parser)
    parser.add_argument(
        "--timers-queue",
        default=DEFAULT_TIMERS_QUEUE,
        metavar="NAME",
        help=f"queue of the timers executions arm (default: {DEFAULT_TIMERS_QUEUE})",
    )
    parser.add_argument(
        "--invoke-queue",
        default=None,
        metavar="NAME",
        help="queue of the invocations executions start (needed with --handler)",
    )
    parser.add_argument(
        "--handler",
        action="append",
        default=[],
        type=_handler_argument,
        metavar="TYPE=PATH",
        help="run <invoke type=TYPE> with the InvokeHandler class at import path PATH (repeatable)",
    )


def handler_classes(pairs: list[tuple[str, str]]) -> dict[str, type[InvokeHandler]]:
    """The invoke handler classes named by ``--handler``; ``CommandError`` if one is not."""
    handlers: dict[str, type[InvokeHandler]] = {}
    for invoke_type, path in pairs:
        if invoke_type in handlers:
            raise _main.CommandError(f"invoke type {invoke_type!r} has two handlers")
        try:
            found = locate(path)
        except ResolutionError as exc:
            raise _main.CommandError(str(exc)) from None
        if not (isinstance(found, type) and issubclass(found, InvokeHandler)):
            raise _main.CommandError(f"{path!r} is not an InvokeHandler subclass")
        handlers[invoke_type] = found
    return handlers


def host_functions_of(args: argparse.Namespace) -> HostFunctions | None:
    """The host functions ``--functions`` names (None without it); ``CommandError`` if the
    option does not name a mapping of valid host functions."""
    if args.functions is None:
        return None
    try:
        return import_functions(args.functions)
    except HostFunctionError as exc:
        raise _main.CommandError(f"--functions {exc}") from None


def executions_for(
    pool: AsyncConnectionPool[Any], oban: Oban, prefix: str, args: argparse.Namespace
) -> Executions:
    """``Executions`` on ``pool`` whose steps arm jobs through ``oban``, as the options say."""
    try:
        config = execution_config(
            oban, timers_queue=args.timers_queue, invoke_queue=args.invoke_queue
        )
        executor = ObanExecutor(config, handlers=handler_classes(args.handler))
    except StatifierObanError as exc:
        raise _main.CommandError(str(exc)) from None
    functions = host_functions_of(args)
    key = os.environ.get(POSITION_KEY_ENV)
    try:
        return Executions(
            pool,
            executor=executor,
            prefix=prefix,
            position_key=key.encode("utf-8") if key else None,
            functions=functions,
        )
    except PersistenceError as exc:
        raise _main.CommandError(f"${POSITION_KEY_ENV}: {exc}") from None


# -- worker -----------------------------------------------------------------------------


def add_worker_arguments(parser: argparse.ArgumentParser) -> None:
    """The worker's options plus the execution options."""
    _main.add_worker_arguments(parser)
    add_execution_options(parser)


def worker_command(args: argparse.Namespace) -> int:
    """The worker, delivering into durable executions (see the module docstring)."""

    def install(pool: AsyncConnectionPool[Any], oban: Oban, prefix: str) -> None:
        use(executions_for(pool, oban, prefix, args))
        print(
            f"{_main.PROG} worker: delivering into durable executions; new timers go to queue "
            f"{args.timers_queue!r}",
            flush=True,
        )

    try:
        return _main.worker_command(args, on_start=install)
    finally:
        use(None)


_main.register(
    _main.Command(
        name="worker",
        help="run oban queues until SIGINT/SIGTERM, delivering into durable executions",
        add_arguments=add_worker_arguments,
        run=worker_command,
    )
)


# -- executions list|show|send|cancel ---------------------------------------------------


def _json_argument(value: str) -> Any:
    """argparse ``type=`` for a JSON value."""
    try:
        return json.loads(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None


ACTION_PARSERS: list[Callable[[Any], None]] = []
"""Functions adding more ``executions`` subcommands (``statifier_oban.cli._revisions``'s);
each registers its runners in :data:`ACTIONS`."""


def add_executions_arguments(parser: argparse.ArgumentParser) -> None:
    """The subcommands of ``executions``, each with the database options."""
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="list executions (by status, chart, metadata)")
    _main.add_install_arguments(listing)
    listing.add_argument("--status", choices=STATUSES, default=None)
    listing.add_argument("--chart", default=None, metavar="NAME", help="the chart's name")
    listing.add_argument(
        "--revision", default=None, metavar="REVISION",
        help="only executions running this chart revision (identity or unique prefix)",
    )  # fmt: skip
    listing.add_argument(
        "--metadata", type=_json_argument, default=None, metavar="JSON",
        help="only executions whose metadata contains this JSON object",
    )  # fmt: skip
    listing.add_argument("--limit", type=int, default=50, metavar="N", help="page size (50)")
    listing.add_argument("--after", default=None, metavar="ID", help="the page after this id")
    show = actions.add_parser("show", help="status, configuration, datamodel, pending jobs")
    _main.add_install_arguments(show)
    show.add_argument("execution_id", metavar="ID")
    send = actions.add_parser("send", help="step an event into an execution")
    _main.add_install_arguments(send)
    add_execution_options(send)
    send.add_argument("execution_id", metavar="ID")
    send.add_argument("event", metavar="EVENT", help="the event's name")
    send.add_argument("--data", type=_json_argument, default=None, metavar="JSON")
    send.add_argument("--key", default=None, help="an idempotency key: applied at most once")
    cancel = actions.add_parser("cancel", help="run an execution's cancel")
    _main.add_install_arguments(cancel)
    add_execution_options(cancel)
    cancel.add_argument("execution_id", metavar="ID")
    for add_actions in ACTION_PARSERS:
        add_actions(actions)


Action = Callable[[Executions, Oban, argparse.Namespace], Awaitable[int]]


async def _with_executions(args: argparse.Namespace, action: Action) -> int:
    """Run ``action`` with ``Executions`` on a pool of its own and a client-mode Oban."""
    pool = await _main.checked_pool(args.database_url, args.prefix, 2, OBAN_TABLES)
    oban = Oban(pool=pool, name=f"statifier-oban-executions-{os.getpid()}", prefix=args.prefix)
    try:
        if not hasattr(args, "timers_queue"):  # list and show arm nothing
            args.timers_queue, args.invoke_queue, args.handler = DEFAULT_TIMERS_QUEUE, None, []
        if not hasattr(args, "functions"):
            args.functions = None
        return await action(executions_for(pool, oban, args.prefix, args), oban, args)
    finally:
        await pool.close()


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


async def find_revision(executions: Executions, text: str) -> Revision:
    """The revision ``text`` names: an identity, a source identity, or a unique prefix."""
    try:
        return await executions.revision(text)
    except ChartNotRegistered:
        pass
    limit = executions.limits.max_page_size
    found = [
        r
        for r in await executions.revisions(limit=limit)
        if r.identity.startswith(text) or (r.source_identity or "").startswith(text)
    ]
    if len(found) == 1:
        return found[0]
    if not found:
        raise _main.CommandError(f"no chart revision {text!r} is registered")
    raise _main.CommandError(f"{text!r} names {len(found)} revisions: give more of the identity")


async def _list(executions: Executions, oban: Oban, args: argparse.Namespace) -> int:
    revision = None
    if args.revision is not None:
        revision = (await find_revision(executions, args.revision)).identity
    page = await executions.list(
        status=args.status,
        chart=args.chart,
        revision=revision,
        metadata=args.metadata,
        limit=args.limit,
        after=args.after,
    )
    print("id\tstatus\tchart\tsteps\tupdated")
    for execution in page.executions:
        print(
            f"{execution.id}\t{execution.status}\t{execution.chart_name or '-'}"
            f"\t{execution.step_count}\t{_when(execution.updated_at)}"
        )
    if page.after is not None:
        print(f"more: --after {page.after}", file=sys.stderr)
    return 0


async def _show(executions: Executions, oban: Oban, args: argparse.Namespace) -> int:
    execution, state = await executions.load(args.execution_id)
    jobs = await pending_jobs(oban, execution.id)
    now = datetime.now(UTC)
    datamodel = {k: v for k, v in state.datamodel.items() if k not in SYSTEM_VARIABLES}
    lines = [
        ("execution", execution.id),
        ("status", execution.status),
        ("chart", f"{execution.chart_name or '-'} ({execution.chart_identity})"),
        ("steps", f"{execution.step_count} (created {_when(execution.created_at)}, "
                  f"updated {_when(execution.updated_at)})"),
        ("configuration", " ".join(state.configuration_ids()) or "-"),
        ("datamodel", json.dumps(datamodel, sort_keys=True, default=repr)),
        ("metadata", json.dumps(dict(execution.metadata), sort_keys=True)),
    ]  # fmt: skip
    if execution.outcome is not None:
        lines.append(("outcome", json.dumps(dict(execution.outcome), sort_keys=True)))
    if execution.failure is not None:
        lines.append(("failure", json.dumps(dict(execution.failure), sort_keys=True)))
    if execution.parent is not None:
        parent = execution.parent
        lines.append(("parent", f"{parent.execution_id} invoke {parent.invoke_id}"))
    for job in (j for j in jobs if j.kind == "timer"):
        due = job.scheduled_at.replace(tzinfo=UTC)
        lines.append(
            ("timer", f"{job.send_id} -> {job.event} due {_when(due)} "
                      f"(in {(due - now).total_seconds():.1f} s), job {job.job_id} {job.state}")
        )  # fmt: skip
    live = state.live_invocations()
    for invoke_id in sorted(live):
        running = [j for j in jobs if j.kind == "invocation" and j.invoke_id == invoke_id]
        detail = ", ".join(f"job {j.job_id} {j.state}" for j in running) or "no pending job"
        lines.append(("invocation", f"{invoke_id} ({detail})"))
    for fan_out in await executions.fan_outs(execution.id):
        lines.append(
            ("fan-out", f"{fan_out.key.invoke_id} (generation {fan_out.key.generation}): "
                        f"{fan_out.finished} of {fan_out.count} children finished, "
                        f"{fan_out.state}, on {fan_out.policy}")
        )  # fmt: skip
    width = max(len(label) for label, _ in lines)
    for label, value in lines:
        print(f"{label:<{width}}  {value}")
    return 0


def _answer(result: Stepped | AlreadyApplied | Discarded | Declined, what: str) -> int:
    match result:
        case Stepped(execution=execution, state=state):
            configuration = " ".join(state.configuration_ids()) or "-"
            print(f"{what}: {execution.id} is {execution.status} in {configuration}")
            return 0
        case AlreadyApplied(execution=execution, key=key):
            print(f"already applied: key {key!r} was applied to {execution.id} before")
            return 0
        case Discarded(execution=execution, status=status):
            print(f"discarded: {execution.id} is {status}", file=sys.stderr)
            return 1
        case Declined(execution=execution, reason=reason):
            print(f"declined: {reason}", file=sys.stderr)
            return 1


async def _send(executions: Executions, oban: Oban, args: argparse.Namespace) -> int:
    _, state = await executions.load(args.execution_id)
    missing = sorted(invoke_types(state.machine) - set(executions.executor.invoke_types or ()))
    if missing:
        # Stepped here, an <invoke> of such a type would be a chart error and no job: the
        # execution would sit in the invoking state, never answered.
        raise _main.CommandError(
            f"{args.execution_id}'s chart invokes {', '.join(map(repr, missing))}, which this "
            "command has no handler for: give it the workers' --handler and --invoke-queue "
            "options, so that a step entering an invoking state starts the invocation"
        )
    event = Event(name=args.event, data=args.data)
    return _answer(await executions.step(args.execution_id, event, key=args.key), "stepped")


def invoke_types(machine: Machine) -> set[str]:
    """The invoke types a chart names in ``type`` attributes (not the SCXML ones, which
    need no handler; a ``typeexpr`` is known only when it runs)."""
    return {
        invoke.type
        for state in machine.states
        for invoke in state.invokes
        if invoke.type is not None and invoke.type not in planner.SCXML_INVOKE_TYPES
    }


async def _cancel(executions: Executions, oban: Oban, args: argparse.Namespace) -> int:
    return _answer(await executions.cancel(args.execution_id), "cancelled")


ACTIONS: dict[str, Action] = {"list": _list, "show": _show, "send": _send, "cancel": _cancel}


def executions_command(args: argparse.Namespace) -> int:
    """Run one ``executions`` action; 1 on any error (one line on stderr)."""
    name = f"executions {args.action}"
    try:
        return asyncio.run(_with_executions(args, ACTIONS[args.action]))
    except (_main.CommandError, PersistenceError, StatifierObanError) as exc:
        return _main.fail(name, exc)


_main.register(
    _main.Command(
        name="executions",
        help="list, show, send an event to, cancel or migrate durable executions",
        add_arguments=add_executions_arguments,
        run=executions_command,
    )
)
