"""Enqueue and cancel invocation jobs (the session-facing half of ``InvokeHandler``)."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import AsyncConnection
from statifier import instrumentation
from statifier.core.effects import Invoke
from statifier.instrumentation import Instrumentation

from .. import telemetry
from .._config import Config
from .._errors import ConfigError, InvalidScope, ScheduleRejected, StoreUnavailable
from .._names import INVOKE_WORKER, META_DELIVERY, META_TIMEOUT, META_UNRESOLVED_HANDLER
from ..rows._resolve import path_of
from ..rows._traced import carry
from ..store import _statements
from . import _args


async def enqueue(
    config: Config,
    handler: type,
    scope: str,
    invoke: Invoke,
    *,
    conn: AsyncConnection[Any] | None = None,
) -> tuple[int, bool]:
    """Store the job for ``invoke``; return ``(job_id, conflict)``.

    Unique on ``(scope, invoke_id, macrostep)``: a replayed drive conflicts with the
    stored job, a genuine re-entry of the state (a later macrostep) gets a fresh one.
    Raises ``InvalidScope`` (telemetry with scope None, so the raw value never leaks),
    ``ConfigError`` when the config has no invoke queue, ``OpaqueValueError`` when
    params/content cannot be stored; nothing is stored in any of these cases.
    """
    tracer = instrumentation.current
    if tracer is None:
        return await _enqueue(config, handler, scope, invoke, conn, None)
    with tracer.span(
        instrumentation.START_INVOKE,
        scope=scope,
        invoke_id=invoke.invoke_id,
        invoke_type=invoke.type,
        handler=path_of(handler),
        queue=config.invoke_queue,
    ) as span:
        job_id, conflict = await _enqueue(config, handler, scope, invoke, conn, tracer)
        span.set(job_id=job_id, conflict=conflict)
    return job_id, conflict


async def _enqueue(
    config: Config,
    handler: type,
    scope: str,
    invoke: Invoke,
    conn: AsyncConnection[Any] | None,
    tracer: Instrumentation | None,
) -> tuple[int, bool]:
    name = path_of(handler)
    if not isinstance(scope, str) or not scope:
        _rejected(None, invoke.invoke_id, name, "invalid_scope")
        raise InvalidScope(f"scope must be a non-empty string, not {scope!r}")
    if config.invoke_queue is None:
        _rejected(scope, invoke.invoke_id, name, "missing_invoke_queue")
        raise ConfigError("invoke_queue", "invoke_queue is required to enqueue invocations")
    try:
        _statements.check_texts(
            {"invoke id": invoke.invoke_id, "invoke type": invoke.type, "src": invoke.src},
            scope=scope,
        )
        args = _args.encode(scope, name, invoke, config.opaque_codec)
    except ScheduleRejected as exc:
        _rejected(scope, invoke.invoke_id, name, exc.reason)
        raise
    meta: dict[str, Any] = {META_DELIVERY: config.invoke_delivery}
    if config.invoke_timeout is not None:
        meta[META_TIMEOUT] = config.invoke_timeout
    # Written either way: a row without it is cancelled, so only the host's explicit
    # choice (never a row's silence) makes an unknown handler retry.
    meta[META_UNRESOLVED_HANDLER] = config.unresolved_handler
    if tracer is not None:
        carry(meta, tracer)
    cap = getattr(handler, "max_attempts", None)
    params = {
        "args": _statements.jsonb(args),
        "meta": _statements.jsonb(meta),
        "queue": config.invoke_queue,
        "max_attempts": cap if isinstance(cap, int) else 20,
        "channel": _statements.insert_channel(config.oban),
        "scope": scope,
        "invoke_id": invoke.invoke_id,
        "macrostep": str(invoke.macrostep),
    }
    try:
        async with _statements.connection(config.oban, conn) as db:
            cursor = await db.execute(
                _statements.statement(config.oban, "insert_invocation"), params
            )
            row = await cursor.fetchone()
            if row is None:
                found = await db.execute(
                    _statements.statement(config.oban, "find_invocation"), params
                )
                row = await found.fetchone()
    except StoreUnavailable:
        _rejected(scope, invoke.invoke_id, name, "store_unavailable")
        raise
    except psycopg.Error as exc:
        _rejected(scope, invoke.invoke_id, name, "insert_failed")
        raise StoreUnavailable(f"inserting the invocation job failed: {exc}") from exc
    if row is None:
        _rejected(scope, invoke.invoke_id, name, "insert_failed")
        raise StoreUnavailable("the invocation job was neither inserted nor found")
    telemetry.emit(
        telemetry.INVOKE_ENQUEUED,
        scope=scope,
        invoke_id=invoke.invoke_id,
        macrostep=invoke.macrostep,
        handler=name,
        queue=row[2],
        conflict=row[3],
        job_id=row[0],
    )
    return row[0], row[3]


def _rejected(scope: str | None, invoke_id: str, handler: str, reason: str) -> None:
    telemetry.emit(
        telemetry.INVOKE_ENQUEUE_REJECTED,
        scope=scope,
        invoke_id=invoke_id,
        handler=handler,
        reason=reason,
    )


async def cancel(
    config: Config,
    scope: str,
    invoke_id: str,
    *,
    handler: type | None = None,
    conn: AsyncConnection[Any] | None = None,
) -> int:
    """Cancel the pending jobs of an invocation, every macrostep generation; the count.

    Executing jobs are never touched: an invocation whose own answer exits the invoking
    state cancels its own id while its job is still running.
    """
    if not isinstance(scope, str) or not scope:
        raise InvalidScope(f"scope must be a non-empty string, not {scope!r}")
    async with _statements.connection(config.oban, conn) as db:
        count = await _statements.cancel_pending(
            db,
            config.oban,
            worker=INVOKE_WORKER,
            key="invoke_id",
            scope=scope,
            value=invoke_id,
            reason=f"invocation {invoke_id!r} left its state",
        )
    telemetry.emit(
        telemetry.INVOKE_CANCELLED,
        count=count,
        scope=scope,
        invoke_id=invoke_id,
        handler=path_of(handler) if handler is not None else None,
    )
    return count
