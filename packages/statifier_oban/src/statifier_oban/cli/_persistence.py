"""What the commands over durable executions share (imported only with statifier_persistence).

:func:`executions_for` builds the ``Executions`` a command steps, as the execution options
say (``--timers-queue``, ``--invoke-queue``, ``--handler``, ``--functions``);
:func:`with_executions` runs a command's work on a pool of its own with a client-mode
``Oban``; the BasicHTTP allow-list and locations come from the environment
(``STATIFIER_BASICHTTP_*``, see ``statifier.basichttp``), as the position key does, so that
every process agrees; :func:`worker_hook` is what ``statifier-oban worker`` runs before its queues
start, so that it delivers into executions; :func:`find_revision` reads a REVISION
argument.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier.basichttp import BasicHTTPError, Locations, OutboundPolicy
from statifier.cli import kit
from statifier_persistence import ChartNotRegistered, Executions, PersistenceError, Revision

from .._errors import ResolutionError, StatifierObanError
from ..executions import ObanExecutor, current_executor, execution_config, use
from ..invocations._handler import InvokeHandler
from ..rows._resolve import locate
from ..store._schema import OBAN_TABLES
from ._main import DEFAULT_TIMERS_QUEUE, PROG, checked_pool

__all__ = [
    "POSITION_KEY_ENV",
    "ExecutionOptions",
    "executions_for",
    "find_revision",
    "handler_classes",
    "use",
    "with_executions",
    "worker_hook",
]

POSITION_KEY_ENV = "STATIFIER_POSITION_KEY"
"""The environment variable holding the position key (UTF-8, at least 16 bytes), when the
host stores its positions with one (``Executions(position_key=...)``)."""


@dataclass(frozen=True, slots=True)
class ExecutionOptions:
    """The execution options of a command (``_main.execution_options``)."""

    timers_queue: str = DEFAULT_TIMERS_QUEUE
    invoke_queue: str | None = None
    handlers: tuple[tuple[str, str], ...] = ()
    functions: str | None = None
    history: bool = True


def handler_classes(pairs: tuple[tuple[str, str], ...]) -> dict[str, type[InvokeHandler]]:
    """The invoke handler classes ``--handler`` names; ``CommandError`` if one is not."""
    handlers: dict[str, type[InvokeHandler]] = {}
    for invoke_type, path in pairs:
        if invoke_type in handlers:
            raise kit.CommandError(f"invoke type {invoke_type!r} has two handlers")
        try:
            found = locate(path)
        except ResolutionError as exc:
            module = path.partition(":")[0] if ":" in path else path.rpartition(".")[0]
            hint = kit.not_on_path_hint(module)
            raise kit.CommandError(f"--handler {path}: {hint or exc}") from None
        if not (isinstance(found, type) and issubclass(found, InvokeHandler)):
            raise kit.CommandError(f"{path!r} is not an InvokeHandler subclass")
        handlers[invoke_type] = found
    return handlers


def executions_for(
    pool: AsyncConnectionPool[Any], oban: Oban, prefix: str, options: ExecutionOptions
) -> Executions:
    """``Executions`` on ``pool`` whose steps arm jobs through ``oban``, as ``options`` say."""
    try:
        policy = OutboundPolicy.from_env(os.environ)
        locations = Locations.from_env(os.environ)
    except BasicHTTPError as exc:
        raise kit.CommandError(str(exc)) from None
    try:
        config = execution_config(
            oban, timers_queue=options.timers_queue, invoke_queue=options.invoke_queue
        )
        executor = ObanExecutor(
            config, handlers=handler_classes(options.handlers), basichttp=policy
        )
    except StatifierObanError as exc:
        raise kit.CommandError(str(exc)) from None
    functions = kit.load_functions(options.functions)
    key = os.environ.get(POSITION_KEY_ENV)
    try:
        return Executions(
            pool,
            executor=executor,
            prefix=prefix,
            position_key=key.encode("utf-8") if key else None,
            functions=functions,
            history=options.history,
            basichttp=locations,
        )
    except PersistenceError as exc:
        raise kit.CommandError(f"${POSITION_KEY_ENV}: {exc}") from None


def worker_hook(
    options: ExecutionOptions,
) -> Callable[[AsyncConnectionPool[Any], Oban, str], None]:
    """What the worker runs before its queues start: deliver into executions."""

    def install(pool: AsyncConnectionPool[Any], oban: Oban, prefix: str) -> None:
        executions = executions_for(pool, oban, prefix, options)
        use(executions)
        print(
            f"{PROG} worker: delivering into durable executions; new timers go to queue "
            f"{options.timers_queue!r}",
            flush=True,
        )
        hosts = current_executor().basichttp.hosts
        allowed = f"to {', '.join(hosts)}" if hosts else "refused ($STATIFIER_BASICHTTP_ALLOW)"
        print(f"{PROG} worker: BasicHTTP sends {allowed}", flush=True)

    return install


type Work[T] = Callable[[Executions, Oban], Awaitable[T]]
"""A command's work, given the executions and the client-mode ``Oban`` they arm jobs on."""


def with_executions[T](
    database_url: str,
    prefix: str,
    work: Work[T],
    options: ExecutionOptions | None = None,
) -> T:
    """Run ``work`` with ``Executions`` on a pool of its own and a client-mode Oban."""

    async def run() -> T:
        pool = await checked_pool(database_url, prefix, 2, OBAN_TABLES)
        oban = Oban(pool=pool, name=f"statifier-oban-executions-{os.getpid()}", prefix=prefix)
        try:
            executions = executions_for(pool, oban, prefix, options or ExecutionOptions())
            return await work(executions, oban)
        finally:
            await pool.close()

    return asyncio.run(run())


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
        raise kit.CommandError(f"no chart revision {text!r} is registered")
    raise kit.CommandError(f"{text!r} names {len(found)} revisions: give more of the identity")
