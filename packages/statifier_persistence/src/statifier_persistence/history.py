"""An execution's history: one entry per transaction that changed it (ADR 25).

Every ``create``, step, fired timer, ``cancel``, ``migrate``, ``park`` and ``unpark``
appends a :class:`HistoryEntry` to ``statifier_history`` in its own transaction: the
entry and the change commit together or not at all. An entry says when (``seq``, the
execution's own counter, and ``at``, the transaction's time on the database clock), why
(``trigger``, ``key``), with what (``event``), from where to where (configuration and
status before and after) and what the transaction did (timers armed and cancelled,
invocations started and cancelled, sends, errors, logs, and ``detail``: the failure, the
outcome, the revisions of a migration).

Whatever a chart or a caller controls is bounded in an entry: event data and logged
values are kept as they are when they are small JSON (at most :data:`MAX_DATA_BYTES`
written out), else as a rendering of at most :data:`MAX_VALUE_CHARS` characters
(``statifier.values.brief``); texts are clipped (``statifier.values.clip``); each list
keeps its first :data:`MAX_ITEMS` items and ``omitted`` counts what was left out.

:meth:`HistoryEntry.to_json` is the one JSON shape of an entry: ``statifier-oban
executions history --json`` prints it, and every other reader (an HTTP API, tracing)
uses it. :meth:`HistoryEntry.from_json` reads it back, checking every field (storage is
as untrusted as a caller). :class:`History` is the switch and the bounds a host gives
``Executions(history=...)``; pruning old entries is ``Executions.prune_history``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, Literal, get_args

from statifier.values import ValueRefused, brief, clip, json_text_utf8, measure

from ._errors import InvalidArgument
from ._records import STATUSES, ExecutionStatus, utc_text

EntryKind = Literal["created", "event", "fired", "cancelled", "migrated", "parked", "unparked"]
"""What a history entry records: ``created`` (the initial drive), ``event`` (``step``),
``fired`` (a delayed send fired, ``fire``), ``cancelled`` (``cancel``), ``migrated``,
``parked``, ``unparked``."""

ENTRY_KINDS: Final[tuple[EntryKind, ...]] = get_args(EntryKind)
"""Every entry kind, in the order above."""

TriggerSource = Literal["api", "timer", "invocation", "operator", "parent", "http"]
"""Who asked for a change: ``api`` (a host's call, the default), ``timer`` (a fired timer
job), ``invocation`` (an invocation's answer, or a fan-out's settled answer, as a job, or
a message from a chart the execution invoked), ``operator`` (a ``statifier-oban``
command), ``parent`` (a fan-out's child start, the cancelling of a parent's children, an
invoked chart's start in its parent's step, or a message from its parent), ``http`` (a
BasicHTTP POST to the execution's location, or the failure of one it sent, as a job)."""

TRIGGER_SOURCES: Final[tuple[TriggerSource, ...]] = get_args(TriggerSource)
"""Every trigger source, in the order above."""

MAX_ITEMS: Final = 20
"""Items an entry keeps per list (timers armed, errors, logs, states...)."""

MAX_VALUE_CHARS: Final = 200
"""Characters of a rendered value (event data or a logged value too large to keep)."""

MAX_DATA_BYTES: Final = 1024
"""Event data and logged values at most this large written out are kept as they are."""

MAX_TEXT_CHARS: Final = 200
"""Characters kept of a text: an error message, a state id, a send id, a detail."""

ROW_FIELDS: Final = ("execution_id", "seq", "at")
"""The fields of an entry that are columns of its row, not part of its stored body."""


class HistoryFormatError(ValueError):
    """A JSON value is not a history entry (``HistoryEntry.from_json``)."""


# -- the parts of an entry ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Trigger:
    """Who asked for a change: ``source`` (see ``TriggerSource``), the ``job_id`` of the
    job that asked (a timer, an invocation answer), and a free ``detail`` (a command, a
    user; at most :data:`MAX_TEXT_CHARS` characters are kept)."""

    source: TriggerSource = "api"
    job_id: int | None = None
    detail: str | None = None

    def __post_init__(self) -> None:
        if self.source not in TRIGGER_SOURCES:
            raise InvalidArgument(
                f"a trigger source is one of {', '.join(TRIGGER_SOURCES)}, not {self.source!r}"
            )
        if self.job_id is not None and (
            isinstance(self.job_id, bool) or not isinstance(self.job_id, int)
        ):
            raise InvalidArgument(f"a trigger's job_id is an integer, not {self.job_id!r}")
        if self.detail is not None and not isinstance(self.detail, str):
            raise InvalidArgument(f"a trigger's detail is text, not {self.detail!r}")

    def to_json(self) -> dict[str, Any]:
        """``{"source", "job_id", "detail"}``."""
        detail = None if self.detail is None else text(self.detail)
        return {"source": self.source, "job_id": self.job_id, "detail": detail}


@dataclass(frozen=True, slots=True)
class EventRecord:
    """The event a step drove: its ``name`` and its ``data`` as kept (``data_clipped``:
    ``data`` is a rendering of a value too large or not JSON, see the module docstring)."""

    name: str
    data: Any = None
    data_clipped: bool = False

    def to_json(self) -> dict[str, Any]:
        """``{"name", "data", "data_clipped"}``."""
        return {"name": self.name, "data": self.data, "data_clipped": self.data_clipped}


@dataclass(frozen=True, slots=True)
class ArmedTimer:
    """A delayed send the transaction armed: due ``delay_ms`` after the entry's ``at``."""

    send_id: str
    event: str
    target: str | None
    delay_ms: int

    def due_at(self, armed_at: datetime) -> datetime:
        """When the timer falls due, for an entry made at ``armed_at``."""
        return armed_at + timedelta(milliseconds=self.delay_ms)


@dataclass(frozen=True, slots=True)
class SentEvent:
    """An immediate ``<send>``: its ``event`` and ``target`` (None: the execution itself,
    driven in the same transaction)."""

    event: str
    target: str | None


@dataclass(frozen=True, slots=True)
class StartedInvocation:
    """An ``<invoke>`` the transaction started (its job, for a durable executor)."""

    invoke_id: str
    type: str


@dataclass(frozen=True, slots=True)
class RaisedError:
    """An error the chart raised (``error.execution``...), where it was raised."""

    name: str
    message: str
    line: int | None


@dataclass(frozen=True, slots=True)
class LogLine:
    """A ``<log>``: its label and its value as kept (``value_clipped`` as for event data)."""

    label: str | None
    value: Any
    value_clipped: bool = False


# -- the entry ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One entry of an execution's history; see the module docstring.

    ``seq`` counts the transactions that changed the execution (1 is its creation; gaps
    are entries pruned, or written while history was off). ``at`` is the transaction's
    time (UTC, database clock). ``key`` is the step's idempotency key. ``event`` is None
    for a creation, a cancel, a migration, a park and an unpark. ``transition_taken``
    says whether the event's macrostep took a transition (None when no event was driven
    by the execution itself: a creation, a cancel, a timer sent elsewhere); when it took
    none, ``unmatched`` is the notice (with a "did you mean" over the events the
    configuration accepts). ``configuration_before`` and ``configuration_after`` are the
    active state ids (every active state, document order). ``detail`` holds what only
    some kinds have: ``chart`` (created), ``from``/``to`` (migrated), ``failure``,
    ``outcome``. ``omitted`` counts list items left out over :data:`MAX_ITEMS`.
    """

    execution_id: str
    seq: int
    at: datetime
    kind: EntryKind
    trigger: Trigger = field(default_factory=Trigger)
    key: str | None = None
    event: EventRecord | None = None
    transition_taken: bool | None = None
    unmatched: str | None = None
    configuration_before: tuple[str, ...] = ()
    configuration_after: tuple[str, ...] = ()
    status_before: ExecutionStatus | None = None
    status: ExecutionStatus = "active"
    timers_armed: tuple[ArmedTimer, ...] = ()
    timers_cancelled: tuple[str, ...] = ()
    sends: tuple[SentEvent, ...] = ()
    invocations_started: tuple[StartedInvocation, ...] = ()
    invocations_cancelled: tuple[str, ...] = ()
    errors: tuple[RaisedError, ...] = ()
    logs: tuple[LogLine, ...] = ()
    detail: Mapping[str, Any] = field(default_factory=dict)
    omitted: int = 0

    def __repr__(self) -> str:
        event = f" {self.event.name!r}" if self.event is not None else ""
        return (
            f"<HistoryEntry {self.execution_id} #{self.seq} {self.kind}{event} "
            f"-> {self.status} at {utc_text(self.at)}>"
        )

    def to_json(self) -> dict[str, Any]:
        """The entry as a JSON object: the one shape of a history entry (ADR 25).

        Times are UTC ISO-8601 text; each armed timer carries its ``due_at``.
        """
        return {
            "execution_id": self.execution_id,
            "seq": self.seq,
            "at": utc_text(self.at),
            **self._body(self.at),
        }

    def _body(self, at: datetime | None) -> dict[str, Any]:
        """Every field but the row's (``due_at`` of the timers only with ``at``)."""
        return {
            "kind": self.kind,
            "trigger": self.trigger.to_json(),
            "key": self.key,
            "event": self.event.to_json() if self.event is not None else None,
            "transition_taken": self.transition_taken,
            "unmatched": self.unmatched,
            "configuration_before": list(self.configuration_before),
            "configuration_after": list(self.configuration_after),
            "status_before": self.status_before,
            "status": self.status,
            "timers_armed": [_timer_json(timer, at) for timer in self.timers_armed],
            "timers_cancelled": list(self.timers_cancelled),
            "sends": [{"event": s.event, "target": s.target} for s in self.sends],
            "invocations_started": [
                {"invoke_id": i.invoke_id, "type": i.type} for i in self.invocations_started
            ],
            "invocations_cancelled": list(self.invocations_cancelled),
            "errors": [{"name": e.name, "message": e.message, "line": e.line} for e in self.errors],
            "logs": [
                {"label": log.label, "value": log.value, "value_clipped": log.value_clipped}
                for log in self.logs
            ],
            "detail": dict(self.detail),
            "omitted": self.omitted,
        }

    @classmethod
    def from_json(cls, value: Any) -> HistoryEntry:
        """The entry a :meth:`to_json` object describes (``due_at`` is derived, not read).

        ``execution_id``, ``seq``, ``at``, ``kind`` and ``status`` are required; a field
        left out takes its default (None, empty, 0, the ``api`` trigger). Every field is
        checked; ``HistoryFormatError`` says which one is wrong.
        """
        return _parse_entry(_Fields(value, "entry", _DEFAULTS))


_REQUIRED: Final = ("kind", "status")
"""The body fields an entry always has."""

_DEFAULTS: Final[Mapping[str, Any]] = {
    name: value
    for name, value in HistoryEntry("", 0, datetime.min, "created")._body(None).items()
    if name not in _REQUIRED
}
"""The JSON of every other body field when it holds its default."""


def _timer_json(timer: ArmedTimer, at: datetime | None) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "send_id": timer.send_id,
        "event": timer.event,
        "target": timer.target,
        "delay_ms": timer.delay_ms,
    }
    if at is not None:
        fields["due_at"] = utc_text(timer.due_at(at))
    return fields


@dataclass(frozen=True, slots=True)
class HistoryPage:
    """One page of ``Executions.history``: entries by ``seq``; pass ``after`` for the next
    page (None: no entry after these yet)."""

    entries: tuple[HistoryEntry, ...]
    after: int | None

    def __repr__(self) -> str:
        return f"<HistoryPage {len(self.entries)} entries, after={self.after}>"


@dataclass(frozen=True, slots=True)
class History:
    """Whether ``Executions`` writes history, and how reads are bounded.

    ``enabled``: write an entry in every transaction that changes an execution (the
    default). Off, nothing is written (``seq`` still counts, so entries written later
    show the gap); every process stepping the executions should agree.
    ``max_page_size``: the most entries one ``history`` call returns.
    ``max_entry_bytes``: a stored entry larger than this is refused on read
    (``CorruptExecution``); entries are far smaller by construction.
    """

    enabled: bool = True
    max_page_size: int = 1000
    max_entry_bytes: int = 1024 * 1024

    def __post_init__(self) -> None:
        if not isinstance(self.enabled, bool):
            raise InvalidArgument(f"enabled must be a bool, not {self.enabled!r}")
        for name in ("max_page_size", "max_entry_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgument(f"{name} must be a positive integer, not {value!r}")


# -- who asked ------------------------------------------------------------------------------

_trigger: ContextVar[Trigger | None] = ContextVar("statifier_persistence_trigger", default=None)


def triggered_by(trigger: Trigger) -> AbstractContextManager[Trigger]:
    """Record ``trigger`` as the cause of every change ``Executions`` makes in this block
    (in this task and what it awaits); outside any block the trigger is ``Trigger()``
    (``api``). The oban deliveries use it (``timer``, ``invocation``); so do the
    ``statifier-oban`` commands (``operator``). A trigger that is not a ``Trigger`` is
    refused at once (``InvalidArgument``)."""
    if not isinstance(trigger, Trigger):
        raise InvalidArgument(f"trigger must be a Trigger, not {trigger!r}")
    return _Triggered(trigger)


class _Triggered:
    """``triggered_by``'s block: a class, not a generator, as every durable step of a
    worker enters one (a generator's context manager costs about four times the calls)."""

    __slots__ = ("_token", "_trigger")

    def __init__(self, trigger: Trigger) -> None:
        self._trigger = trigger
        self._token: Token[Trigger | None] | None = None

    def __enter__(self) -> Trigger:
        if self._token is not None:
            raise RuntimeError("a triggered_by block is entered once")
        self._token = _trigger.set(self._trigger)
        return self._trigger

    def __exit__(self, *exc_info: object) -> None:
        if self._token is not None:
            _trigger.reset(self._token)


def current_trigger() -> Trigger:
    """The trigger of the innermost :func:`triggered_by` block (``Trigger()`` outside)."""
    trigger = _trigger.get()
    return trigger if trigger is not None else _API


_API: Final = Trigger()


# -- bounded values -------------------------------------------------------------------------


def kept_value(value: Any) -> tuple[Any, bool]:
    """``(value, False)`` for a JSON-like value at most :data:`MAX_DATA_BYTES` written out
    that PostgreSQL's jsonb can hold; else ``(rendering, True)``, a ``brief`` rendering of
    at most :data:`MAX_VALUE_CHARS` characters."""
    if value is None or type(value) is bool:
        return value, False
    try:
        measure(value, MAX_DATA_BYTES)
        text = json_text_utf8(value)
        text.encode("utf-8")  # a lone surrogate cannot be stored
    except (ValueRefused, ValueError, TypeError, RecursionError):
        return brief(value, MAX_VALUE_CHARS), True
    if "\\u0000" in text:  # jsonb refuses NUL characters
        return brief(value, MAX_VALUE_CHARS), True
    return value, False


def text(value: str) -> str:
    """``value`` clipped to :data:`MAX_TEXT_CHARS` characters, with what jsonb cannot hold
    (NUL, lone surrogates) written as backslash escapes."""
    if not value.isascii() or "\x00" in value:
        value = value.encode("utf-8", "backslashreplace").decode("utf-8")
        value = value.replace("\x00", "\\x00")
    return clip(value, MAX_TEXT_CHARS)


# -- reading an entry back ------------------------------------------------------------------


class _Fields:
    """A JSON object being parsed; every accessor checks the type it returns. A key of
    ``defaults`` may be left out."""

    def __init__(self, value: Any, where: str, defaults: Mapping[str, Any] | None = None) -> None:
        if not isinstance(value, Mapping):
            raise HistoryFormatError(f"{where} is not a JSON object")
        self.value = value
        self.where = where
        self.defaults = defaults or {}

    def _get(self, key: str) -> Any:
        if key in self.value:
            return self.value[key]
        if key in self.defaults:
            return self.defaults[key]
        raise HistoryFormatError(f"{self.where} has no {key!r}")

    def fail(self, key: str, expected: str) -> HistoryFormatError:
        return HistoryFormatError(f"{self.where}.{key} is not {expected}")

    def text(self, key: str) -> str:
        found = self._get(key)
        if not isinstance(found, str):
            raise self.fail(key, "text")
        return found

    def optional_text(self, key: str) -> str | None:
        found = self._get(key)
        if found is not None and not isinstance(found, str):
            raise self.fail(key, "text or null")
        return found

    def integer(self, key: str, *, optional: bool = False) -> Any:
        found = self._get(key)
        if optional and found is None:
            return None
        if isinstance(found, bool) or not isinstance(found, int) or found < 0:
            raise self.fail(key, "a count")
        return found

    def flag(self, key: str, *, optional: bool = False) -> Any:
        found = self._get(key)
        if not isinstance(found, bool) and not (optional and found is None):
            raise self.fail(key, "true or false")
        return found

    def choice(self, key: str, choices: tuple[str, ...], *, optional: bool = False) -> Any:
        found = self._get(key)
        if optional and found is None:
            return None
        if found not in choices:
            raise self.fail(key, f"one of {', '.join(choices)}")
        return found

    def object(self, key: str) -> _Fields:
        return _Fields(self._get(key), f"{self.where}.{key}")

    def items[T](self, key: str, parse: Callable[[Any, str], T]) -> tuple[T, ...]:
        found = self._get(key)
        if not isinstance(found, list):
            raise self.fail(key, "a list")
        return tuple(parse(item, f"{self.where}.{key}[{n}]") for n, item in enumerate(found))


def _text_item(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise HistoryFormatError(f"{where} is not text")
    return value


def _parse_timer(value: Any, where: str) -> ArmedTimer:
    fields = _Fields(value, where)
    return ArmedTimer(
        fields.text("send_id"),
        fields.text("event"),
        fields.optional_text("target"),
        fields.integer("delay_ms"),
    )


def _parse_send(value: Any, where: str) -> SentEvent:
    fields = _Fields(value, where)
    return SentEvent(fields.text("event"), fields.optional_text("target"))


def _parse_invocation(value: Any, where: str) -> StartedInvocation:
    fields = _Fields(value, where)
    return StartedInvocation(fields.text("invoke_id"), fields.text("type"))


def _parse_error(value: Any, where: str) -> RaisedError:
    fields = _Fields(value, where)
    return RaisedError(
        fields.text("name"), fields.text("message"), fields.integer("line", optional=True)
    )


def _parse_log(value: Any, where: str) -> LogLine:
    fields = _Fields(value, where)
    label = fields.optional_text("label")
    return LogLine(label, fields._get("value"), fields.flag("value_clipped"))


def _parse_trigger(fields: _Fields) -> Trigger:
    return Trigger(
        fields.choice("source", TRIGGER_SOURCES),
        fields.integer("job_id", optional=True),
        fields.optional_text("detail"),
    )


def _parse_event(fields: _Fields) -> EventRecord:
    return EventRecord(fields.text("name"), fields._get("data"), fields.flag("data_clipped"))


def _parse_entry(fields: _Fields) -> HistoryEntry:
    at_text = fields.text("at")
    try:
        at = datetime.fromisoformat(at_text)
    except ValueError:
        raise fields.fail("at", "an ISO-8601 time") from None
    if at.tzinfo is None:
        raise fields.fail("at", "a time with its UTC offset")
    detail = fields._get("detail")
    if not isinstance(detail, Mapping):
        raise fields.fail("detail", "a JSON object")
    event = None if fields._get("event") is None else _parse_event(fields.object("event"))
    seq = fields.integer("seq")
    return HistoryEntry(
        execution_id=fields.text("execution_id"),
        seq=seq,
        at=at,
        kind=fields.choice("kind", ENTRY_KINDS),
        trigger=_parse_trigger(fields.object("trigger")),
        key=fields.optional_text("key"),
        event=event,
        transition_taken=fields.flag("transition_taken", optional=True),
        unmatched=fields.optional_text("unmatched"),
        configuration_before=fields.items("configuration_before", _text_item),
        configuration_after=fields.items("configuration_after", _text_item),
        status_before=fields.choice("status_before", STATUSES, optional=True),
        status=fields.choice("status", STATUSES),
        timers_armed=fields.items("timers_armed", _parse_timer),
        timers_cancelled=fields.items("timers_cancelled", _text_item),
        sends=fields.items("sends", _parse_send),
        invocations_started=fields.items("invocations_started", _parse_invocation),
        invocations_cancelled=fields.items("invocations_cancelled", _text_item),
        errors=fields.items("errors", _parse_error),
        logs=fields.items("logs", _parse_log),
        detail=dict(detail),
        omitted=fields.integer("omitted"),
    )


__all__ = [
    "ENTRY_KINDS",
    "MAX_DATA_BYTES",
    "MAX_ITEMS",
    "MAX_TEXT_CHARS",
    "MAX_VALUE_CHARS",
    "TRIGGER_SOURCES",
    "ArmedTimer",
    "EntryKind",
    "EventRecord",
    "History",
    "HistoryEntry",
    "HistoryFormatError",
    "HistoryPage",
    "LogLine",
    "RaisedError",
    "SentEvent",
    "StartedInvocation",
    "Trigger",
    "TriggerSource",
    "current_trigger",
    "triggered_by",
]
