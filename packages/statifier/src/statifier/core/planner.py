"""The one owner of send targets, delivered events and driver instructions.

The core returns effects; every driver (the live ``Session``, the ``VirtualDriver``, the
durable timer host and its deliveries, the durable execution stepper) turns them into
actions. What a ``<send>`` target means, which event a send or an invocation's answer
delivers, and what a driver must do for each effect are decided here, once, so the
drivers agree by construction:

* ``parse_target`` reads a send target: the session itself, ``#_internal``,
  ``#_parent``, ``#_<invokeid>``, ``#_scxml_<sessionid>``, or something the SCXML
  Event I/O Processor does not support; for a BasicHTTP send (SCXML C.2), an http(s) URL.
* ``io_processors`` is a session's ``_ioprocessors``.
* ``sent_event``, ``invocation_done``, ``invocation_failed``, ``from_invocation``,
  ``undeliverable``, ``received_post`` and ``post_failed`` build the events drivers hand
  back to the core.
* ``plan`` (and ``plan_effect``) turn a step's effects into ordered instructions;
  ``fire`` says what a delayed send becomes when its delay has elapsed.

Everything here is pure: no I/O, no clock, no registry.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, Final
from urllib.parse import urlsplit

from statifier._slots import builder
from statifier.core import effects as fx
from statifier.core.events import BASIC_HTTP_EVENT_PROCESSOR, SCXML_EVENT_PROCESSOR, Event
from statifier.values import clip

SCXML_SEND_TYPES = frozenset({"scxml", SCXML_EVENT_PROCESSOR})
"""``<send type>`` values the SCXML Event I/O Processor accepts (absent type means it too)."""

BASIC_HTTP = "basichttp"
"""The short name of the BasicHTTP Event I/O Processor (its ``_ioprocessors`` key, SCXML
D.2, and a ``<send type>`` spelling, as ``scxml`` is the SCXML one's)."""

BASIC_HTTP_SEND_TYPES = frozenset({BASIC_HTTP, BASIC_HTTP_EVENT_PROCESSOR})
"""``<send type>`` values of the BasicHTTP Event I/O Processor (SCXML C.2)."""

SEND_TYPES = SCXML_SEND_TYPES | BASIC_HTTP_SEND_TYPES
"""Every ``<send type>`` the engine accepts; any other raises ``error.execution``."""

MAX_URL_LENGTH = 2048
"""The longest URL a BasicHTTP send may target."""

HTTP_POST_EVENT = "HTTP.POST"
"""The name of an event POSTed without ``_scxmleventname`` (SCXML D.2: the method's name)."""

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
class HttpTarget:
    """An http(s) URL a BasicHTTP send POSTs to (SCXML C.2)."""

    url: str


@dataclass(frozen=True, slots=True)
class UnsupportedTarget:
    """A target the send's I/O processor cannot address (spec 6.2: an error)."""

    target: str


Target = (
    SelfTarget
    | InternalTarget
    | ParentTarget
    | InvocationTarget
    | SessionTarget
    | HttpTarget
    | UnsupportedTarget
)

SELF = SelfTarget()
_INTERNAL_TARGET = InternalTarget()
_PARENT_TARGET = ParentTarget()


def parse_target(target: str | None, session_id: str, send_type: str | None = None) -> Target:
    """What a ``<send target>`` of ``send_type`` addresses, seen from session ``session_id``.

    A BasicHTTP send (``send_type`` in ``BASIC_HTTP_SEND_TYPES``) targets an absolute http
    or https URL with a host and no user information, at most ``MAX_URL_LENGTH``
    characters (anything else is unsupported); a send of any other type, the SCXML
    targets. None as the target of a BasicHTTP send is ``UnsupportedTarget("")``: the
    core refuses it before it asks (SCXML D.2).
    """
    if send_type in BASIC_HTTP_SEND_TYPES:
        if target is not None and is_http_url(target):
            return HttpTarget(target)
        return UnsupportedTarget(target or "")
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


def is_http_url(text: str) -> bool:
    """Whether ``text`` is an absolute http or https URL a BasicHTTP send may target: a
    host, a valid port if any, no user information, no whitespace or control characters,
    at most ``MAX_URL_LENGTH`` characters."""
    if len(text) > MAX_URL_LENGTH or not text.isprintable() or " " in text:
        return False
    try:
        parts = urlsplit(text)
        host = parts.hostname
        _ = parts.port  # a port that is not a number in range raises
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(host) and "@" not in parts.netloc


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
        case HttpTarget(url=url):
            return url
        case UnsupportedTarget(target=raw):
            return raw


def origin_of(session_id: str) -> str:
    """The ``origin`` (and ``_ioprocessors`` location) of events a session sends."""
    return SESSION_PREFIX + session_id


def io_processors(session_id: str, basichttp: str | None = None) -> dict[str, Any]:
    """The ``_ioprocessors`` system variable of a session: the SCXML Event I/O Processor
    under its type URI and under ``scxml``, with the session's location; and, when the
    host gives the session a BasicHTTP location (``basichttp``, the URL a POST reaches it
    at), the BasicHTTP Event I/O Processor under its type URI and under ``basichttp``
    (SCXML D.2)."""
    # Values are never changed in place: both names can share one description.
    # ``origin_of``, inlined: every position read rebuilds this.
    processor = {"location": SESSION_PREFIX + session_id}
    processors: dict[str, Any] = {SCXML_EVENT_PROCESSOR: processor, "scxml": processor}
    if basichttp is not None:
        http = {"location": basichttp}
        processors[BASIC_HTTP_EVENT_PROCESSOR] = http
        processors[BASIC_HTTP] = http
    return processors


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


def received_post(name: str | None, data: Any, raw: str) -> Event:
    """The external event a BasicHTTP POST to a session's location becomes (SCXML D.2):
    named by its ``_scxmleventname`` (``HTTP.POST`` without one), its other content as
    ``data``, the message as it arrived as ``raw``. Build the arguments with
    ``statifier.basichttp.read_post``."""
    return Event(
        name=name if name is not None else HTTP_POST_EVENT,
        type="external",
        data=data,
        origintype=BASIC_HTTP_EVENT_PROCESSOR,
        raw=raw,
    )


def post_failed(
    send_id: str | None, message: str, *, status: int | None = None, attempts: int | None = None
) -> Event:
    """``error.communication`` for a BasicHTTP POST that was refused or failed (SCXML 6.2),
    after the step that sent it: ``data`` holds the ``message``, and the HTTP ``status``
    of the last answer and the ``attempts`` made when there were any."""
    data: dict[str, Any] = {"message": clip(message)}
    if status is not None:
        data["status"] = status
    if attempts is not None:
        data["attempts"] = attempts
    return Event(name="error.communication", type="platform", data=data, sendid=send_id)


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
class Post:
    """POST a BasicHTTP send to ``url`` (SCXML C.2; ``statifier.basichttp.outbound`` writes
    the message). A host that may not reach the URL (its allow-list), or whose POST
    fails for good, hands ``post_failed(effect.send_id, ...)`` to the sending session's
    core; a host with no BasicHTTP client refuses every POST that way."""

    effect: fx.Send | fx.SendDelayed
    url: str


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
    Deliver
    | Post
    | Schedule
    | CancelTimers
    | StartInvocation
    | StopInvocation
    | Forward
    | Report
    | Halt
)


def plan_effect(session_id: str, effect: fx.Effect) -> Instruction | None:
    """The instruction for one effect, or None when it only informs observers."""
    match effect:
        case fx.Send():
            return _sent(session_id, effect)
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


def fire(scope: str, effect: fx.SendDelayed) -> Deliver | Post:
    """What a delayed send becomes once its delay has elapsed: an ordinary delivery (a
    ``Post`` for a BasicHTTP send).

    ``scope`` is the id of the session (or durable execution) that scheduled it.
    """
    return _sent(scope, effect)


_DeliverBuilder: Final = builder(Deliver)


def _sent(session_id: str, effect: fx.Send | fx.SendDelayed) -> Deliver | Post:
    """The instruction of a send whose time has come (immediate, or a delay elapsed)."""
    target = parse_target(effect.target, session_id, effect.type)
    if isinstance(target, HttpTarget):
        return Post(effect, target.url)
    deliver = _DeliverBuilder()  # ``Deliver(...)``, built fast: every send delivered
    deliver.event = sent_event(session_id, effect)
    deliver.target = target
    deliver.send_id = effect.send_id
    deliver.__class__ = Deliver
    built: Deliver = deliver
    return built
