"""The effect vocabulary: the only way the pure core talks to the world.

Every effect is a frozen, slotted dataclass stamped with the ``macrostep``,
``microstep`` and ``round`` counters in force when it was produced. Drivers (a live
session, the virtual test driver, a durable host) perform them; the core never does.

``owner`` names the executable-content block a node belongs to, as a tuple:
``("onentry", state_index, block_ordinal)``, ``("onexit", state_index, block_ordinal)``,
``("transition", t_index)`` or ``("finalize", state_index, invoke_index)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from statifier.budget import Reason
from statifier.core.events import Event

Owner = tuple[str, int] | tuple[str, int, int]


class NotRecorded:
    """The type of ``NOT_RECORDED``: a value an effect does not carry outside trace mode."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<not recorded>"

    def __copy__(self) -> NotRecorded:
        return self

    def __deepcopy__(self, memo: object) -> NotRecorded:
        return self

    def __reduce__(self) -> str:
        return "NOT_RECORDED"


NOT_RECORDED: Final = NotRecorded()
"""Stands in for ``DatamodelChange`` values outside trace mode (compare with ``is``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Effect:
    """Fields every effect carries."""

    macrostep: int
    microstep: int
    round: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Send(Effect):
    """An immediate ``<send>`` to an external target (or to the session's own queue).

    ``target`` is the raw string the author wrote (None means the session itself).
    ``send_id`` is the author's id or a generated ``send_<n>``; ``id_from_author`` says which.
    """

    event: str
    target: str | None
    type: str | None
    data: Any
    send_id: str
    c_index: int
    owner: Owner | None
    id_from_author: bool
    caller_context: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SendDelayed(Effect):
    """A ``<send>`` with a delay: the driver delivers it ``delay_ms`` after it was scheduled.

    ``ordinal`` comes from the execution's ``timer_counter`` and is unique per execution:
    ``(scope, ordinal)`` is a sound dedup key for a durable timer store.
    """

    event: str
    target: str | None
    type: str | None
    data: Any
    send_id: str
    delay_ms: int
    c_index: int
    owner: Owner | None
    ordinal: int
    id_from_author: bool
    caller_context: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Cancel(Effect):
    """A ``<cancel>``: every pending delayed send under ``send_id`` must be dropped."""

    send_id: str
    c_index: int
    owner: Owner | None
    ordinal: int
    caller_context: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Invoke(Effect):
    """Start an invocation. ``src`` is never dereferenced by the core.

    ``content`` is the evaluated ``<content>`` (a string of markup for an inline child
    chart, or a JSON-like value); ``params`` maps names to values.
    """

    invoke_id: str
    type: str
    src: str | None
    params: dict[str, Any]
    content: Any
    autoforward: bool
    state_index: int
    invoke_index: int
    caller_context: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelInvoke(Effect):
    """Stop a live invocation because its state exited (or the interpreter exited)."""

    invoke_id: str
    state_index: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Autoforward(Effect):
    """Forward an external event to an invocation declared with ``autoforward="true"``."""

    invoke_id: str
    state_index: int
    event: Event


@dataclass(frozen=True, slots=True, kw_only=True)
class Log(Effect):
    """A ``<log>``: ``value`` is the evaluated expression (None when absent)."""

    label: str | None
    value: Any
    c_index: int
    owner: Owner


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorRaised(Effect):
    """An ``error.*`` event entered the internal queue (the chart will see it as ``_event``).

    Charts often handle errors silently (a failed condition is false), so drivers surface
    this effect to the host: ``name`` is the event (``error.execution``,
    ``error.communication``...), ``message`` says what failed, ``sendid`` names the send
    that failed (if any), and ``line``/``c_index``/``owner`` locate the element that was
    running (None for errors a driver reports after the fact).
    """

    name: str
    message: str
    sendid: str | None
    line: int | None
    c_index: int | None
    owner: Owner | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Done(Effect):
    """The interpreter exited. Always the last effect of an execution.

    ``configuration`` lists the ids of every state active at exit, in document order;
    ``donedata`` is the top-level final state's donedata (None when absent).
    """

    donedata: Any
    configuration: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetExhausted(Effect):
    """A macrostep budget ran out before the macrostep reached quiescence (ADR 0011).

    ``reason`` names the budget: ``rounds`` (``max_macrostep_rounds``), ``steps``,
    ``effects``, ``internal_events`` or ``output_bytes`` (``statifier.budget``); ``budget``
    is its limit. The execution stays running, as it stood at the end of the last round.
    """

    configuration: tuple[str, ...]
    budget: int
    pending_internal_events: int
    reason: Reason = "rounds"


@dataclass(frozen=True, slots=True, kw_only=True)
class DatamodelInit(Effect):
    """The datamodel as initialized: system variables plus every declared id (unbound)."""

    datamodel: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class DatamodelChange(Effect):
    """One successful write to the datamodel (``<data>``, ``<assign>``, ``idlocation``...).

    ``location`` and ``path`` say what was written. ``new_value`` and ``prior_value`` are
    the values only when the execution runs in trace mode; otherwise both are
    ``NOT_RECORDED`` (read the datamodel of the returned state instead).
    """

    location: str
    path: tuple[str | int, ...]
    new_value: Any
    prior_value: Any
    c_index: int | None
    owner: Owner | None


@dataclass(frozen=True, slots=True, kw_only=True)
class EventDequeued(Effect):
    """Trace: an event was taken from a queue (``source`` is ``internal`` or ``external``)."""

    event: Event
    source: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TransitionsSelected(Effect):
    """Trace: the transitions selected for one microstep, by ``t_index``."""

    t_indexes: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class StatesExited(Effect):
    """Trace: states exited in one microstep, in exit order (ids)."""

    states: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class StatesEntered(Effect):
    """Trace: states entered in one microstep, in entry order (ids)."""

    states: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class MacrostepStable(Effect):
    """Trace: the macrostep reached quiescence and the execution is still running."""

    configuration: tuple[str, ...]


CORE_EFFECTS: tuple[type[Effect], ...] = (
    Send,
    SendDelayed,
    Cancel,
    Invoke,
    CancelInvoke,
    Autoforward,
    Log,
    ErrorRaised,
    Done,
    BudgetExhausted,
    DatamodelInit,
    DatamodelChange,
)
"""Effects produced whatever the ``trace`` setting."""

TRACE_EFFECTS: tuple[type[Effect], ...] = (
    EventDequeued,
    TransitionsSelected,
    StatesExited,
    StatesEntered,
    MacrostepStable,
)
"""Effects produced only when the execution was initialized with ``trace=True``."""
