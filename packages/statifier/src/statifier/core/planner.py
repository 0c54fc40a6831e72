"""The one owner of send targets, delivered events and driver instructions.

The core returns effects; every driver (the live ``Session``, the ``VirtualDriver``, the
durable timer host and its deliveries, the durable execution stepper) turns them into
actions. What a ``<send>`` target means, which event a send or an invocation's answer
delivers, and what a driver must do for each effect are decided here, once, so the
drivers agree by construction:

* ``parse_target`` reads a send target: the session itself, ``#_internal``,
  ``#_parent``, ``#_<invokeid>``, ``#_scxml_<sessionid>``, or something the SCXML
  Event I/O Processor does not support.
* ``sent_event``, ``invocation_done``, ``invocation_failed``, ``from_invocation`` and
  ``undeliverable`` build the events drivers hand back to the core.
* ``plan`` (and ``plan_effect``) turn a step's effects into ordered instructions;
  ``fire`` says what a delayed send becomes when its delay has elapsed.

Everything here is pure: no I/O, no clock, no registry.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from statifier.core import effects as fx
from statifier.core.events import SCXML_EVENT_PROCESSOR, Event
from statifier.values import clip

SCXML_SEND_TYPES = frozenset({"scxml", SCXML_EVENT_PROCESSOR})
"""``<send type>`` values the SCXML Event I/O Processor accepts (absent type means it too)."""

SCXML_INVOKE_TYPES = frozenset(
    {"scxml", "http://www.w3.org/TR/scxml/", "http://www.w3.org/TR/scxml"}
)
"""``<invoke type>`` spellings of the built-in SCXML invoke type (absent type means it too)."""

INTERNAL = "#_internal"
PARENT = "#_parent"
SESSION_PREFIX = "#_scxml_"
INVOCATION_PREFIX = "#_"

# -- targets ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SelfTarget:
    """The sending session's own external queue (no target, or its own ``#_scxml_`` id)."""


@dataclass(frozen=True, slots=True)
class InternalTarget:
    """``#_internal``: the sending session's internal queue."""


@dataclass(frozen=True, slots=True)
class ParentTarget:
    """``#_parent``: the session that invoked the sender."""


@dataclass(frozen=True, slots=True)
class InvocationTarget:
    """``#_<invokeid>``: a live invocation of the sender."""

    invoke_id: str


@dataclass(frozen=True, slots=True)
class SessionTarget:
    """``#_scxml_<sessionid>``: another session, by id."""

    session_id: str


@dataclass(frozen=True, slots=True)
class UnsupportedTarget:
    """A target the SCXML Event I/O Processor cannot address (spec 6.2: an error)."""

    target: str


Target = (
    SelfTarget
    | InternalTarget
    | ParentTarget
    | InvocationTarget
    | SessionTarget
    | UnsupportedTarget
)

SELF = SelfTarget()
_INTERNAL_TARGET = InternalTarget()
_PARENT_TARGET = ParentTarget()


def parse_target(target: str | None, session_id: str) -> Target:
    """What a ``<send target>`` addresses, seen from session ``session_id``."""
    if target is None:
        return SELF
    if target == INTERNAL:
        return _INTERNAL_TARGET
    if target == PARENT:
        return _PARENT_TARGET
    if target.startswith(SESSION_PREFIX):
        other = target[len(SESSION_PREFIX) :]
        if not other:
            return UnsupportedTarget(target)
        return SELF if other == session_id else SessionTarget(other)
    if target.startswith(INVOCATION_PREFIX) and len(target) > len(INVOCATION_PREFIX):
        return InvocationTarget(target[len(INVOCATION_PREFIX) :])
    return UnsupportedTarget(target)


def address(target: Target) -> str:
    """The SCXML spelling of a parsed target (for messages; ``SelfTarget`` has none)."""
    match target:
        case SelfTarget():
            return "the session itself"
        case InternalTarget():
            return INTERNAL
        case ParentTarget():
            return PARENT
        case InvocationTarget(invoke_id=invoke_id):
            return INVOCATION_PREFIX + invoke_id
        case SessionTarget(session_id=session_id):
            return SESSION_PREFIX + session_id
        case UnsupportedTarget(target=raw):
            return raw


def origin_of(session_id: str) -> str:
    """The ``origin`` (and ``_ioprocessors`` location) of events a session sends."""
    return SESSION_PREFIX + session_id


def io_processors(session_id: str) -> dict[str, Any]:
    """The ``_ioprocessors`` system variable of a session: the SCXML Event I/O Processor
    under its type URI and under ``scxml``, with the session's location."""
    # Values are never changed in place: both names can share one description.
    processor = {"location": origin_of(session_id)}
    return {SCXML_EVENT_PROCESSOR: processor, "scxml": processor}


# -- events ----------------------------------------------------------------------------


def sent_event(session_id: str, effect: fx.Send | fx.SendDelayed) -> Event:
    """The event a ``<send>`` delivers, immediate or delayed, whatever carries it.

    ``sendid`` is set only when the author wrote the id (generated ids are not
    observable, SCXML C.1); ``data`` and ``caller_context`` are carried verbatim. A send
    to ``#_internal`` delivers an internal event; every other target an external one.
    """
    return Event(
        name=effect.event,
        type="internal" if effect.target == INTERNAL else "external",
        data=effect.data,
        sendid=effect.send_id if effect.id_from_author else None,
        origin=origin_of(session_id),
        origintype=SCXML_EVENT_PROCESSOR,
        caller_context=effect.caller_context,
    )


def internal_send_event(
    session_id: str, name: str, data: Any, send_id: str, id_from_author: bool
) -> Event:
    """The event an immediate ``<send target="#_internal">`` places on the internal queue."""
    return Event(
        name=name,
        type="internal",
        data=data,
        sendid=send_id if id_from_author else None,
        origin=origin_of(session_id),
        origintype=SCXML_EVENT_PROCESSOR,
    )


def from_invocation(event: Event, invoke_id: str) -> Event:
    """An event an invoked session sent to ``#_parent``, as the parent receives it."""
    return replace(event, invokeid=invoke_id)


def invocation_done(
    invoke_id: str,
    data: Any = None,
    *,
    child_session_id: str | None = None,
    caller_context: Any = None,
) -> Event:
    """``done.invoke.<id>``: an invocation finished with ``data``.

    ``child_session_id`` names the invoked session when the invocation was one (its
    ``#_scxml_`` address becomes the origin); ``caller_context`` is the one the
    ``Invoke`` effect carried, so the answer's macrostep continues its trace.
    """
    return Event(
        name=f"done.invoke.{invoke_id}",
        type="external",
        data=data,
        invokeid=invoke_id,
        origin=origin_of(child_session_id) if child_session_id is not None else None,
        origintype=SCXML_EVENT_PROCESSOR if child_session_id is not None else None,
        caller_context=caller_context,
    )


def invocation_failed(invoke_id: str, reason: Any, *, caller_context: Any = None) -> Event:
    """``error.communication.invoke.<id>``: an invocation failed or could not start.

    ``reason`` becomes the event data; a bare string is wrapped as ``{"reason": ...}``.
    """
    return Event(
        name=f"error.communication.invoke.{invoke_id}",
        type="external",
        data={"reason": reason} if isinstance(reason, str) else reason,
        invokeid=invoke_id,
        caller_context=caller_context,
    )


def invocation_start_failed(invoke_id: str, message: str) -> Event:
    """The platform error a driver raises when an invocation's handler cannot start it."""
    return Event(
        name=f"error.communication.invoke.{invoke_id}",
        type="platform",
        data={"message": clip(message)},
        invokeid=invoke_id,
    )


def undeliverable(send_id: str | None, message: str) -> Event:
    """``error.communication`` for a send the driver could not deliver (spec 6.2)."""
    return Event(
        name="error.communication", type="platform", data={"message": clip(message)}, sendid=send_id
    )


def is_answer_of(event: Event, invoke_id: str) -> bool:
    """Whether ``event`` ends invocation ``invoke_id`` (its done or failure event)."""
    return event.name in (f"done.invoke.{invoke_id}", f"error.communication.invoke.{invoke_id}")


# -- instructions ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Deliver:
    """Deliver ``event`` to ``target`` now.

    ``SelfTarget``: queue it as an external event of the sending session (dropped if it
    has halted). ``InternalTarget``: hand it to the core with ``deliver_internal``.
    Anything the driver cannot reach (and every ``UnsupportedTarget``): hand
    ``undeliverable(send_id, ...)`` to the sending session's core instead.
    """

    event: Event
    target: Target
    send_id: str | None


@dataclass(frozen=True, slots=True)
class Schedule:
    """Arm a timer for a delayed send; when it fires, perform ``fire(scope, effect)``."""

    effect: fx.SendDelayed


@dataclass(frozen=True, slots=True)
class CancelTimers:
    """Drop every pending timer the session armed under ``effect.send_id``."""

    effect: fx.Cancel


@dataclass(frozen=True, slots=True)
class StartInvocation:
    """Start an invocation; a handler that cannot start it answers
    ``invocation_start_failed`` into the core."""

    effect: fx.Invoke


@dataclass(frozen=True, slots=True)
class StopInvocation:
    """Cancel a live invocation; nothing it sends or answers afterwards is delivered."""

    effect: fx.CancelInvoke


@dataclass(frozen=True, slots=True)
class Forward:
    """Forward an external event to a live invocation (``autoforward``)."""

    invoke_id: str
    event: Event


@dataclass(frozen=True, slots=True)
class Report:
    """Make a ``<log>`` or an ``error.*`` the chart raised visible to the host."""

    effect: fx.Log | fx.ErrorRaised


@dataclass(frozen=True, slots=True)
class Halt:
    """The execution finished (``Done``) or ran out of rounds (``BudgetExhausted``).

    On ``Done`` the driver drops the session's timers (spec 6.2) and, for an invoked
    session that was not cancelled, answers the parent with ``invocation_done``.
    """

    effect: fx.Done | fx.BudgetExhausted


Instruction = (
    Deliver | Schedule | CancelTimers | StartInvocation | StopInvocation | Forward | Report | Halt
)


def plan_effect(session_id: str, effect: fx.Effect) -> Instruction | None:
    """The instruction for one effect, or None when it only informs observers."""
    match effect:
        case fx.Send():
            target = parse_target(effect.target, session_id)
            return Deliver(sent_event(session_id, effect), target, effect.send_id)
        case fx.SendDelayed():
            return Schedule(effect)
        case fx.Cancel():
            return CancelTimers(effect)
        case fx.Invoke():
            return StartInvocation(effect)
        case fx.CancelInvoke():
            return StopInvocation(effect)
        case fx.Autoforward():
            return Forward(effect.invoke_id, effect.event)
        case fx.Log() | fx.ErrorRaised():
            return Report(effect)
        case fx.Done() | fx.BudgetExhausted():
            return Halt(effect)
    return None


def plan(session_id: str, effects: Iterable[fx.Effect]) -> list[Instruction]:
    """The instructions for a step's effects, in effect order."""
    planned = (plan_effect(session_id, effect) for effect in effects)
    return [instruction for instruction in planned if instruction is not None]


def fire(scope: str, effect: fx.SendDelayed) -> Deliver:
    """What a delayed send becomes once its delay has elapsed: an ordinary delivery.

    ``scope`` is the id of the session (or durable execution) that scheduled it.
    """
    return Deliver(sent_event(scope, effect), parse_target(effect.target, scope), effect.send_id)
