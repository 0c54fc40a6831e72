"""Durable timers: schedule a ``SendDelayed``, cancel by send id, count what is pending.

Keys: a timer is deduplicated on ``(scope, ordinal)`` for its row's whole life (a replayed
drive gets the existing job back with ``conflict=True``) and cancelled on
``(scope, send_id)`` (every pending match; zero is not an error). ``scope`` is the session
id for a live host, the durable execution id otherwise.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Final, NamedTuple, Protocol

import psycopg
from psycopg import AsyncConnection, AsyncCursor
from psycopg.rows import tuple_row
from statifier import instrumentation
from statifier._slots import builder
from statifier.budget import MAX_LIMIT
from statifier.core.effects import Cancel, SendDelayed
from statifier.instrumentation import Instrumentation, Span
from statifier.runtime.session import CANCEL_MARKS

from .. import telemetry
from .._config import Config
from .._errors import (
    DuplicateOrdinal,
    InvalidScope,
    MissingOrdinal,
    MissingSendId,
    NonSelfTarget,
    ScheduleRejected,
    StoreUnavailable,
    UndecodableRow,
    ValueRefused,
)
from .._names import ANNOUNCE_HORIZON_MS, META_DELIVERY, META_TIMEOUT, TIMER_WORKER
from ..rows import _fields
from ..rows._traced import carry
from ..store import _statements
from . import _args

logger = logging.getLogger("statifier_oban.timers")


@dataclass(frozen=True, slots=True)
class TimerJob:
    """The job row holding one timer. ``conflict`` is True when it already existed."""

    job_id: int
    scope: str
    ordinal: int
    send_id: str
    state: str
    queue: str
    scheduled_at: datetime
    inserted_at: datetime
    conflict: bool


def _check_effect(
    scope: Any, effect: SendDelayed, *, scope_checked: bool = False, any_target: bool = False
) -> None:
    """The refusals shared by ``schedule`` and ``schedule_many`` (``scope_checked``: the
    caller has checked ``scope`` already, once for a whole batch; ``any_target``: the
    caller routes every target when the timer fires, see ``schedule``)."""
    if effect.target is not None and not any_target:
        raise NonSelfTarget(
            f"only sends to the session itself are durable, not to {effect.target!r}",
            scope=scope,
            send_id=effect.send_id,
        )
    if not scope_checked:
        _check_scope(scope)
    ordinal = effect.ordinal
    if isinstance(ordinal, bool) or not isinstance(ordinal, int) or ordinal < 1:
        raise MissingOrdinal(f"ordinal must be an integer >= 1, not {ordinal!r}", scope=scope)
    if not isinstance(effect.send_id, str) or not effect.send_id:
        raise MissingSendId(f"send_id must be a non-empty string, not {effect.send_id!r}")
    _statements.check_texts(
        {
            "event name": effect.event,
            "send id": effect.send_id,
            "target": effect.target,
            "type": effect.type,
        },
        scope=scope,
        send_id=effect.send_id,
    )


def _check_scope(scope: Any) -> str:
    if not isinstance(scope, str) or not scope:
        raise InvalidScope(f"scope must be a non-empty string, not {scope!r}", scope=scope)
    return scope


async def schedule(
    config: Config,
    scope: str,
    effect: SendDelayed,
    *,
    conn: AsyncConnection[Any] | None = None,
    any_target: bool = False,
) -> TimerJob:
    """Store one timer job firing ``effect.delay_ms`` from now (the database's clock).

    Refuses (``ScheduleRejected`` subclasses, nothing stored, a ``schedule_rejected``
    event) a non-None target unless ``any_target`` (a durable execution routes every
    target itself when the timer fires: ``#_internal``, ``#_parent``...; a live session's
    other routes name its process's bookkeeping and stay in-process), an empty or
    non-string scope, an ordinal below 1, opaque
    fields that cannot be stored exactly, and values PostgreSQL refuses (``ValueRefused``).
    A store that cannot answer raises ``StoreUnavailable``. With ``conn`` the job is inserted in the
    caller's own transaction (a rollback removes it). A duplicate ``(scope, ordinal)``,
    in any state, returns the existing job with ``conflict=True``.
    """
    tracer = instrumentation.current
    if tracer is None:
        return await _schedule(config, scope, effect, conn, any_target, None)
    with _timer_span(tracer, config, scope, effect) as span:
        job = await _schedule(config, scope, effect, conn, any_target, tracer)
        span.set(job_id=job.job_id, conflict=job.conflict)
    return job


def _timer_span(
    tracer: Instrumentation,
    config: Config,
    scope: str,
    effect: SendDelayed,
    parent: object = None,
) -> AbstractContextManager[Span]:
    """The ``ScheduleTimer`` span of one timer (``parent`` as for ``Instrumentation.span``);
    its job's id and whether it existed are set once it is stored."""
    return tracer.span(
        instrumentation.SCHEDULE_TIMER,
        parent=parent,
        scope=scope,
        event=effect.event,
        send_id=effect.send_id,
        ordinal=effect.ordinal,
        delay_ms=effect.delay_ms,
        queue=config.timers_queue,
    )


async def _schedule(
    config: Config,
    scope: str,
    effect: SendDelayed,
    conn: AsyncConnection[Any] | None,
    any_target: bool,
    tracer: Instrumentation | None,
) -> TimerJob:
    try:
        _check_effect(scope, effect, any_target=any_target)
        args = _args.encode(scope, effect, config.opaque_codec)
    except ScheduleRejected as exc:
        _rejected(scope, effect, exc.reason)
        raise
    params = {
        "args": _statements.jsonb(args),
        "meta": _statements.plain_jsonb(_meta(config, tracer)),
        "queue": config.timers_queue,
        "delay_ms": effect.delay_ms,
        "scope": scope,
        "ordinal": str(effect.ordinal),
        "due_channel": _statements.due_channel(config.oban),
    }
    with _store_errors(
        "inserting the timer job",
        "the timer",
        scope=scope,
        send_id=effect.send_id,
        rejected=(_OneTimer(scope, effect),),
    ):
        async with _statements.connection(config.oban, conn) as db:
            row = await (
                await db.execute(_statements.statement(config.oban, "insert_timer"), params)
            ).fetchone()
            if row is None:
                # The conflicting row may have committed after this statement's snapshot:
                # a fresh statement sees it.
                found = await db.execute(_statements.statement(config.oban, "find_timer"), params)
                row = await found.fetchone()
    if row is None:  # pragma: no cover - the follow-up SELECT sees any conflicting row
        _rejected(scope, effect, "insert_failed")
        raise StoreUnavailable("the timer job was neither inserted nor found")
    return _scheduled(scope, effect, row)


@dataclass(frozen=True, slots=True)
class PreparedTimer:
    """A timer checked and encoded, not stored yet: :func:`store_prepared` stores it,
    usually with others (a drive's, or several executions' at once)."""

    scope: str
    effect: SendDelayed
    args: dict[str, Any]
    plain: bool
    """Whether the args hold only plain JSON (see ``_plain``): a batch of plain timers
    takes ``_statements.plain_jsonb``'s fast encoder."""
    parent: object = None
    """The context the timer was armed in (``Instrumentation.capture``) when tracing was
    on: the parent of its ``ScheduleTimer`` span (:func:`send_traced`), wherever the
    batch is stored."""


_PreparedBuilder: Final = builder(PreparedTimer)


def prepare(
    config: Config, scope: str, effect: SendDelayed, *, any_target: bool = False
) -> PreparedTimer:
    """Check and encode one timer, storing nothing: ``schedule``'s refusals
    (``ScheduleRejected``, announced by a ``schedule_rejected`` event) before anything
    is sent to the database. ``any_target`` as for ``schedule``. While tracing is on,
    the current context is kept as the timer's ``parent``."""
    try:
        plain = isinstance(scope, str) and bool(scope) and _plain(effect)
        if not plain:
            _check_effect(scope, effect, any_target=any_target)
        args = _args.encode(scope, effect, config.opaque_codec)
    except ScheduleRejected as exc:
        _rejected(scope, effect, exc.reason)
        raise
    tracer = instrumentation.current
    parent = tracer.capture() if tracer is not None else None
    prepared = _PreparedBuilder()  # ``PreparedTimer(...)``, built fast: one a step
    prepared.scope = scope
    prepared.effect = effect
    prepared.args = args
    prepared.plain = plain
    prepared.parent = parent
    prepared.__class__ = PreparedTimer
    built: PreparedTimer = prepared
    return built


def _plain(effect: SendDelayed) -> bool:
    """Whether ``effect`` passes ``_check_effect`` at a glance and its args hold only plain
    JSON: strings, ints, bools and None (no float, no other type).

    The common case of a batch: no target, an int ordinal, ASCII texts without NUL. Any
    other effect (which may be refused, or hold a float) takes the full check and the
    standard JSON encoder, so refusals and stored values stay exactly as they were.
    """
    owner = effect.owner
    kind = effect.type
    ordinal = effect.ordinal
    return (
        effect.target is None
        and type(ordinal) is int
        and ordinal >= 1
        and _plain_text(effect.send_id)
        and effect.send_id != ""
        and _plain_text(effect.event)
        and (kind is None or _plain_text(kind))
        and type(effect.delay_ms) is int
        and type(effect.c_index) is int
        and type(effect.macrostep) is int
        and type(effect.microstep) is int
        and type(effect.round) is int
        and type(effect.id_from_author) is bool
        and (owner is None or all(map(_OWNER_PART_TYPES.__contains__, map(type, owner))))
    )


_OWNER_PART_TYPES = frozenset({str, int})
"""What a plain owner holds (its shape is the decoder's to check)."""


def _plain_text(value: Any) -> bool:
    """A ``str`` (not a subclass) that ``check_texts`` accepts at a glance."""
    return type(value) is str and value.isascii() and "\x00" not in value


async def schedule_many(
    config: Config,
    scope: str,
    effects: Iterable[SendDelayed],
    *,
    conn: AsyncConnection[Any] | None = None,
) -> list[TimerJob]:
    """Schedule every effect of one drive in a single statement; same rules as ``schedule``.

    All effects are validated before anything is stored: one refusal stores none of them.
    Returns the jobs in the order of ``effects`` (conflicts marked as such).
    """
    prepared: list[PreparedTimer] = []
    seen: set[int] = set()
    for effect in effects:
        timer = prepare(config, scope, effect)
        if effect.ordinal in seen:
            _rejected(scope, effect, DuplicateOrdinal.reason)
            raise DuplicateOrdinal(
                f"ordinal {effect.ordinal} appears twice in one batch", scope=scope
            )
        seen.add(effect.ordinal)
        prepared.append(timer)
    if not prepared:
        return []
    tracer = instrumentation.current
    if tracer is None:
        return await store_prepared(config, prepared, conn=conn)
    with tracer.span(
        instrumentation.SCHEDULE_TIMERS,
        scope=scope,
        count=len(prepared),
        queue=config.timers_queue,
    ) as span:
        jobs = await store_prepared(config, prepared, conn=conn, tracer=tracer)
        stored = sum(not job.conflict for job in jobs)
        span.set(stored=stored, conflict=stored < len(jobs))
    return jobs


async def store_prepared(
    config: Config,
    timers: Sequence[PreparedTimer],
    *,
    conn: AsyncConnection[Any] | None = None,
    jobs: bool = True,
    tracer: Instrumentation | None = None,
    metas: Sequence[dict[str, Any]] | None = None,
) -> list[TimerJob]:
    """Store prepared timers, of one scope or several, in a single statement.

    An existing ``(scope, ordinal)`` is kept (a conflict). With ``jobs`` (the default),
    returns the job of each timer, in order, conflicts marked. Without, nothing is read
    back unless a ``timer.scheduled`` handler listens: on a connection in pipeline mode
    the statement then costs no round trip of its own, and an error PostgreSQL raises
    surfaces at the caller's next result or commit (psycopg's, unwrapped). Every job's
    meta carries the trace context of ``tracer``'s current span (None: none), joined with
    the entry of ``metas`` (one per timer, in order; None: none) that is its own
    (:func:`send_traced`).
    """
    if not timers:
        return []
    insert, params = _insert(config, timers, tracer, metas)
    read = jobs or telemetry.handled(telemetry.TIMER_SCHEDULED)
    with _store_errors("inserting timer jobs", "a timer", rejected=timers):
        async with _statements.connection(config.oban, conn) as db:
            if not read:
                await db.execute(insert, params)
                return []
            # Binary results: thousands of timestamps decode faster than from text.
            cursor = db.cursor(binary=True, row_factory=tuple_row)
            await cursor.execute(insert, params)
            inserted, existing = await _read_back(config, db, timers, cursor)
    return _batch_jobs(config, timers, inserted, existing)


async def send_traced(
    config: Config,
    tracer: Instrumentation,
    timers: Sequence[PreparedTimer],
    *,
    conn: AsyncConnection[Any],
) -> Callable[[BaseException | None], Awaitable[None]]:
    """``store_prepared`` while tracing is on, in two halves: still one statement, each
    timer inside a ``ScheduleTimer`` span of its own whose parent is the context the
    timer was armed in (``PreparedTimer.parent``: a step's span, even when a group commit
    stores the timers of several steps), and each job's meta carrying its own span's
    context, which the span of its firing continues (ADR 30).

    This sends the insert on ``conn``; the answer reads the jobs back and ends the spans
    with their ids. On a connection in pipeline mode the caller awaits it once the rest
    of the transaction is sent, so the read costs no round trip of its own; given the
    exception that stopped the transaction instead, it reads nothing and ends the spans
    with it. The spans are the current context until then.

    When no span records (tracing through the API alone, or a trace sampled out) and no
    ``timer.scheduled`` handler listens, nothing wants the jobs' ids: if the insert's row
    count says every timer was stored anew, each span ends with ``stored=1`` (what the
    ``statifier.timers.scheduled`` counter reads) and no row is decoded. Any conflict, or
    a count not yet known, reads the rows back as above.
    """
    stack = ExitStack()
    spans: list[Span] = []
    metas: list[dict[str, Any]] = []
    try:
        for timer in timers:
            opened = _timer_span(tracer, config, timer.scope, timer.effect, timer.parent)
            spans.append(stack.enter_context(opened))
            metas.append(carry({}, tracer))  # the span just entered is the current one
        insert, params = _insert(config, timers, None, metas)
        cursor = conn.cursor(binary=True, row_factory=tuple_row)
        with _store_errors("inserting timer jobs", "a timer", rejected=timers):
            await cursor.execute(insert, params)
    except BaseException as exc:
        stack.__exit__(type(exc), exc, exc.__traceback__)
        raise

    async def read(stopped: BaseException | None) -> None:
        if stopped is not None:
            stack.__exit__(type(stopped), stopped, stopped.__traceback__)
            return
        if (
            cursor.rowcount == len(timers)
            and not any(span.recording() for span in spans)
            and not telemetry.handled(telemetry.TIMER_SCHEDULED)
        ):
            for span in spans:
                span.set(stored=1)
            stack.close()
            return
        try:
            with _store_errors("inserting timer jobs", "a timer", rejected=timers):
                inserted, existing = await _read_back(config, conn, timers, cursor)
            jobs = _batch_jobs(config, timers, inserted, existing)
        except BaseException as exc:
            stack.__exit__(type(exc), exc, exc.__traceback__)
            raise
        for span, job in zip(spans, jobs, strict=True):
            span.set(job_id=job.job_id, conflict=job.conflict)
        stack.close()

    return read


def _insert(
    config: Config,
    timers: Sequence[PreparedTimer],
    tracer: Instrumentation | None,
    metas: Sequence[dict[str, Any]] | None,
) -> tuple[Any, dict[str, Any]]:
    """The insert statement of a batch of prepared timers and its parameters."""
    plain = all(timer.plain for timer in timers)
    encoded = [timer.args for timer in timers]
    params = {
        "args": _statements.plain_jsonb(encoded) if plain else _statements.jsonb(encoded),
        "meta": _statements.plain_jsonb(_meta(config, tracer)),
        "metas": None if metas is None else _statements.plain_jsonb(metas),
        "queue": config.timers_queue,
        "due_channel": _statements.due_channel(config.oban),
    }
    name = _insert_statement([timer.effect for timer in timers], plain)
    return _statements.statement(config.oban, name), params


async def _read_back(
    config: Config,
    db: AsyncConnection[Any],
    timers: Sequence[PreparedTimer],
    cursor: AsyncCursor[tuple[Any, ...]],
) -> tuple[dict[tuple[str, int], Any], dict[tuple[str, int], Any]]:
    """The rows a batch's insert returned, by ``(scope, ordinal)``, and the rows that
    were there already (its conflicts)."""
    inserted = {(row[4], row[3]): row for row in await cursor.fetchall()}
    return inserted, await _conflicts(config, db, timers, inserted)


@contextmanager
def _store_errors(
    action: str,
    refused: str,
    *,
    scope: str | None = None,
    send_id: str | None = None,
    rejected: Sequence[_Scheduling] = (),
) -> Iterator[None]:
    """psycopg's errors as this package raises them: a value PostgreSQL refuses
    (``DataError``) as ``ValueRefused`` ("PostgreSQL refused ``refused``"), any other as
    ``StoreUnavailable`` ("``action`` failed"). The timers being scheduled
    (``rejected``) are announced as rejected first, with the reason (a
    ``StoreUnavailable`` from within too)."""
    try:
        yield
    except psycopg.DataError as exc:
        for timer in rejected:
            _rejected(timer.scope, timer.effect, ValueRefused.reason)
        raise ValueRefused(
            f"PostgreSQL refused {refused}: {exc}", scope=scope, send_id=send_id
        ) from exc
    except psycopg.Error as exc:
        for timer in rejected:
            _rejected(timer.scope, timer.effect, "insert_failed")
        raise StoreUnavailable(f"{action} failed: {exc}") from exc
    except StoreUnavailable:
        for timer in rejected:
            _rejected(timer.scope, timer.effect, "store_unavailable")
        raise


class _Scheduling(Protocol):
    """A timer being scheduled, as a rejection names it (``PreparedTimer`` is one)."""

    @property
    def scope(self) -> str:
        """The scope it was scheduled under."""

    @property
    def effect(self) -> SendDelayed:
        """Its ``<send>``."""


class _OneTimer(NamedTuple):
    """The timer :func:`schedule` stores, as ``_store_errors`` names it."""

    scope: str
    effect: SendDelayed


async def _conflicts(
    config: Config,
    db: AsyncConnection[Any],
    timers: Sequence[PreparedTimer],
    inserted: dict[tuple[str, int], Any],
) -> dict[tuple[str, int], Any]:
    """The rows that were there already, for the timers the insert skipped (conflicts),
    read with one statement per scope."""
    missing: dict[str, list[str]] = {}
    for timer in timers:
        if (timer.scope, timer.effect.ordinal) not in inserted:
            missing.setdefault(timer.scope, []).append(str(timer.effect.ordinal))
    existing: dict[tuple[str, int], Any] = {}
    for scope, ordinals in missing.items():
        found = await db.execute(
            _statements.statement(config.oban, "find_timers"),
            {"scope": scope, "ordinals": ordinals},
        )
        existing.update({(scope, row[6]): row for row in await found.fetchall()})
    return existing


def _insert_statement(batch: list[SendDelayed], plain: bool) -> str:
    """``insert_later_timers`` when no timer of a plain batch (int delays) is due within
    the announce horizon, else ``insert_timers``, which announces the earliest one that is
    (the same rule in SQL: due before now + the horizon)."""
    if plain and min(effect.delay_ms for effect in batch) >= ANNOUNCE_HORIZON_MS:
        return "insert_later_timers"
    return "insert_timers"


def _batch_jobs(
    config: Config,
    timers: Sequence[PreparedTimer],
    inserted: dict[tuple[str, int], Any],
    existing: dict[tuple[str, int], Any],
) -> list[TimerJob]:
    """The job of each timer of a batch, inserted now or found (a conflict), in order."""
    jobs: list[TimerJob] = []
    queue = config.timers_queue
    announce = telemetry.handled(telemetry.TIMER_SCHEDULED)
    for timer in timers:
        scope, effect = timer.scope, timer.effect
        new = inserted.get((scope, effect.ordinal))
        if new is not None:
            job = _new_job(new[0], scope, effect, queue, new[1], new[2])
        else:
            row = existing.get((scope, effect.ordinal))
            if row is None:
                _rejected(scope, effect, "insert_failed")
                raise StoreUnavailable(
                    f"timer ordinal {effect.ordinal} was neither inserted nor found"
                )
            job = _job(scope, effect, row)
        if announce:
            _announce(scope, effect, job)
        jobs.append(job)
    return jobs


_JOB_SLOTS = tuple(getattr(TimerJob, f.name).__set__ for f in fields(TimerJob))
"""The slot setters of ``TimerJob``'s fields, in field order (see ``_new_job``, which sets
all nine: a test compares its jobs with ``TimerJob(...)``)."""


def _new_job(
    job_id: int,
    scope: str,
    effect: SendDelayed,
    queue: str,
    scheduled_at: datetime,
    inserted_at: datetime,
) -> TimerJob:
    """The ``TimerJob`` of a row a batch inserted, equal to the one ``TimerJob(...)`` builds.

    A batch builds thousands: filling the slots of a bare instance costs half what the
    frozen dataclass's ``__init__`` does (it stores each field through
    ``object.__setattr__``).
    """
    job = object.__new__(TimerJob)
    slot = _JOB_SLOTS
    slot[0](job, job_id)
    slot[1](job, scope)
    slot[2](job, effect.ordinal)
    slot[3](job, effect.send_id)
    slot[4](job, "scheduled")
    slot[5](job, queue)
    slot[6](job, scheduled_at)
    slot[7](job, inserted_at)
    slot[8](job, False)
    return job


def _meta(config: Config, tracer: Instrumentation | None) -> dict[str, Any]:
    """A timer job's meta: the delivery to resolve at fire time, the bound if any, and the
    trace context of the scheduling span when tracing is on. Strings and an int only, so
    it is written by ``_statements.plain_jsonb`` (as are the per-timer trace contexts)."""
    meta: dict[str, Any] = {META_DELIVERY: config.delivery}
    if config.timer_timeout is not None:
        meta[META_TIMEOUT] = config.timer_timeout
    if tracer is not None:
        carry(meta, tracer)
    return meta


def _scheduled(scope: str, effect: SendDelayed, row: Any) -> TimerJob:
    """The ``TimerJob`` of a stored (or found) row, announced by ``timer.scheduled``."""
    job = _job(scope, effect, row)
    _announce(scope, effect, job)
    return job


def _job(scope: str, effect: SendDelayed, row: Any) -> TimerJob:
    """The ``TimerJob`` of a row ``(id, state, queue, scheduled_at, inserted_at, conflict)``."""
    return TimerJob(
        row[0], scope, effect.ordinal, effect.send_id, row[1], row[2], row[3], row[4], row[5]
    )


def _announce(scope: str, effect: SendDelayed, job: TimerJob) -> None:
    """The ``timer.scheduled`` event of ``job``."""
    telemetry.emit(
        telemetry.TIMER_SCHEDULED,
        delay_ms=effect.delay_ms,
        scope=scope,
        send_id=effect.send_id,
        ordinal=effect.ordinal,
        macrostep=effect.macrostep,
        microstep=effect.microstep,
        round=effect.round,
        scheduled_at=job.scheduled_at,
        queue=job.queue,
        conflict=job.conflict,
        job_id=job.job_id,
        caller_context=effect.caller_context,
    )


def _rejected(scope: Any, effect: SendDelayed, reason: str) -> None:
    telemetry.emit(
        telemetry.TIMER_SCHEDULE_REJECTED,
        scope=scope,
        send_id=getattr(effect, "send_id", None),
        ordinal=getattr(effect, "ordinal", None),
        reason=reason,
    )


async def cancel_timers(
    config: Config,
    scope: str,
    effect: Cancel,
    *,
    conn: AsyncConnection[Any] | None = None,
) -> int:
    """Cancel every pending timer job under ``(scope, effect.send_id)``; return the count.

    Pending means scheduled, available or retryable: an executing job (typically the one
    whose delivery made the chart run this very cancel) and finished jobs are never
    touched. Matching nothing returns 0.
    """
    reason = f"<cancel sendid={effect.send_id!r}> (ordinal {effect.ordinal})"
    return await cancel_send(
        config,
        scope,
        effect.send_id,
        reason,
        ordinal=effect.ordinal,
        caller_context=effect.caller_context,
        conn=conn,
    )


async def cancel_send(
    config: Config,
    scope: str,
    send_id: str,
    reason: str,
    *,
    ordinal: int | None = None,
    caller_context: Any = None,
    conn: AsyncConnection[Any] | None = None,
) -> int:
    """Cancel every pending timer job under ``(scope, send_id)`` (see :func:`cancel_timers`),
    ``reason`` recorded on each; return the count. ``ordinal`` and ``caller_context`` are
    the cancelling ``<cancel>``'s, for telemetry (None when no ``<cancel>`` ran: its
    execution was cancelled)."""
    _check_scope(scope)
    if not isinstance(send_id, str) or not send_id:
        raise MissingSendId("a cancel needs a send id", scope=scope)
    tracer = instrumentation.current
    if tracer is None:
        return await _cancel_send(config, scope, send_id, reason, ordinal, caller_context, conn)
    with tracer.span(
        instrumentation.CANCEL_TIMER, scope=scope, send_id=send_id, ordinal=ordinal
    ) as span:
        count = await _cancel_send(config, scope, send_id, reason, ordinal, caller_context, conn)
        span.set(cancelled=count)
    return count


async def _cancel_send(
    config: Config,
    scope: str,
    send_id: str,
    reason: str,
    ordinal: int | None,
    caller_context: Any,
    conn: AsyncConnection[Any] | None,
) -> int:
    with _store_errors("cancelling timer jobs", "the cancel", scope=scope, send_id=send_id):
        if _statements.unstorable(send_id) is not None:
            count = 0  # no timer has such a send id: scheduling refuses it
        else:
            async with _statements.connection(config.oban, conn) as db:
                count = await _statements.cancel_pending(
                    db,
                    config.oban,
                    worker=TIMER_WORKER,
                    key="send_id",
                    scope=scope,
                    value=send_id,
                    reason=reason,
                )
    telemetry.emit(
        telemetry.TIMER_CANCELLED,
        count=count,
        scope=scope,
        send_id=send_id,
        ordinal=ordinal,
        caller_context=caller_context,
    )
    return count


async def mark_cancelled(
    config: Config, scope: str, effect: Cancel, *, conn: AsyncConnection[Any]
) -> int:
    """Keep ``effect``'s ordinal on the timer jobs under ``(scope, effect.send_id)`` it
    meets, in ``conn``'s transaction, before :func:`cancel_timers` cancels the pending ones
    (``sql/mark_cancelled_timers.sql``): ``meta.cancelled_by`` on a pending job, which
    :func:`rebase` puts back if the session resumes from before the cancel, and
    ``meta.cancel_ordinal`` on a job a worker is running already, which a cancel cannot
    stop (:func:`cancel_marks`). Returns how many jobs it marked."""
    _check_scope(scope)
    send_id = effect.send_id
    if _statements.unstorable(send_id) is not None:
        return 0  # no timer has such a send id: scheduling refuses it
    params = {"scope": scope, "send_id": send_id, "ordinal": effect.ordinal}
    with _store_errors(
        "marking timer jobs cancelled", "the cancel's mark", scope=scope, send_id=send_id
    ):
        cursor = await conn.execute(
            _statements.statement(config.oban, "mark_cancelled_timers"), params
        )
        return len(await cursor.fetchall())


@dataclass(frozen=True, slots=True)
class Rebased:
    """What :func:`rebase` changed, and the highest ordinal of the scope's timer jobs."""

    cancelled: int
    """Pending timers of later steps, cancelled."""
    restored: int
    """Timers a later step's ``<cancel>`` cancelled, pending again."""
    top_ordinal: int
    """The highest ordinal of the scope's timer jobs, in any state (0 without any)."""


async def rebase(
    config: Config, scope: str, timer_counter: int, *, conn: AsyncConnection[Any]
) -> Rebased:
    """Set a live session's timer jobs back to a position whose ``timer_counter`` is given,
    in ``conn``'s transaction: the pending timers of later steps (ordinal above it) are
    cancelled, the timers a later step's ``<cancel>`` cancelled are pending again, and the
    highest ordinal is read. Raises ``StoreUnavailable`` when the store cannot."""
    _check_scope(scope)
    oban = config.oban
    params = {"scope": scope, "counter": timer_counter}
    try:
        cursor = await conn.execute(_statements.statement(oban, "cancel_lost_timers"), params)
        cancelled = len(await cursor.fetchall())
        cursor = await conn.execute(_statements.statement(oban, "restore_cancelled_timers"), params)
        restored = len(await cursor.fetchall())
        cursor = await conn.execute(
            _statements.statement(oban, "top_timer_ordinal"),
            {"scope": scope, "max": MAX_LIMIT, "max_digits": _fields.MAX_INTEGER_DIGITS},
        )
        row = await cursor.fetchone()
    except psycopg.Error as exc:
        raise StoreUnavailable(f"setting back the timers of {scope!r} failed: {exc}") from exc
    top = int(row[0]) if row is not None else 0
    return Rebased(cancelled, restored, top)


async def cancel_marks(config: Config, scope: str) -> dict[str, int]:
    """Send id -> the latest cancel's ordinal marked on a timer job of ``scope`` that may
    still run (``meta.cancel_ordinal``, :func:`mark_cancelled`); at most ``CANCEL_MARKS``
    jobs are read. A mark that does not read as one (a row anyone may have written) is
    logged and skipped. Raises ``StoreUnavailable`` when it cannot tell."""
    _check_scope(scope)
    params = {
        "scope": scope,
        "limit": CANCEL_MARKS,
        "max_string": _fields.MAX_ROW_STRING,
        "max_digits": _fields.MAX_INTEGER_DIGITS,
    }
    try:
        async with _statements.connection(config.oban, None) as db:
            cursor = await db.execute(_statements.statement(config.oban, "cancel_marks"), params)
            rows = await cursor.fetchall()
    except psycopg.Error as exc:
        raise StoreUnavailable(f"reading the cancel marks of {scope!r} failed: {exc}") from exc
    marks: dict[str, int] = {}
    for job_id, send_id, ordinal in rows:
        try:
            mark = {"send_id": send_id, "cancel_ordinal": ordinal}
            send_id = _fields.string(mark, "send_id")
            ordinal = _fields.integer(mark, "cancel_ordinal", 1)
        except UndecodableRow as exc:
            logger.warning(
                "timer job %s: its cancel mark is unreadable, skipped: %s",
                job_id,
                exc,
                extra={"job_id": job_id, "scope": scope},
            )
            continue
        marks[send_id] = max(ordinal, marks.get(send_id, 0))
    return marks


async def timer_rows_left(config: Config, scope: str, *, conn: AsyncConnection[Any]) -> bool:
    """Whether any timer row of ``scope`` remains in ``oban_jobs``, in whatever state (an
    earlier execution's, when a new one is about to take the id). Raises
    ``StoreUnavailable`` when it cannot tell."""
    _check_scope(scope)
    try:
        cursor = await conn.execute(
            _statements.statement(config.oban, "timer_rows_left"), {"scope": scope}
        )
        row = await cursor.fetchone()
    except psycopg.Error as exc:
        raise StoreUnavailable(f"looking for earlier timer jobs failed: {exc}") from exc
    return bool(row and row[0])


PENDING_CHUNK = 500


async def pending_for(config: Config, scopes: Iterable[str]) -> dict[str, int]:
    """How many timers are pending per scope; every requested scope is a key (0 included).

    Raises ``StoreUnavailable`` when it cannot count: "could not count" is never 0.
    """
    wanted = list(dict.fromkeys(_check_scope(s) for s in scopes))
    counts = dict.fromkeys(wanted, 0)
    try:
        async with _statements.connection(config.oban, None) as db:
            for start in range(0, len(wanted), PENDING_CHUNK):
                chunk = wanted[start : start + PENDING_CHUNK]
                cursor = await db.execute(
                    _statements.statement(config.oban, "count_pending_timers"), {"scopes": chunk}
                )
                for scope, count in await cursor.fetchall():
                    counts[scope] = int(count)
    except psycopg.Error as exc:
        raise StoreUnavailable(f"counting pending timers failed: {exc}") from exc
    return counts
