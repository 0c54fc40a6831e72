"""The payload of a position: its checks, and the state it describes.

A payload (``statifier.core.position``) is checked for shape and for meaning against the
machine it is loaded for, and ``decode_payload`` builds the ``MachineState`` it describes
or raises ``CorruptPosition`` saying what is wrong: a legal configuration, history records
the algorithm could have made, invocations of active states, counters and budgets in
range, a bounded queue and datamodel (ADR 4). ``loads``, ``import_position`` and ``dumps``
(on the payload it would write) all run these checks.

The checks come in two halves: ``decode_shape`` judges the members that place the
execution in its chart (``SHAPE_KEYS``) against the chart alone, so a host may judge equal
ones once (format 3 does, by the bytes of its shape line); ``decode_values`` checks the
rest (``VALUE_KEYS``) for that shape and the host's budget ceiling.

The datamodel is measured value by value (``statifier.values.measure``) unless its JSON
text vouches for every value in it (``fits`` and, for values not decoded from JSON,
``json_typed``): the text then has too few brackets, digits and characters for any value
to be refused.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Container, Iterable
from itertools import pairwise
from typing import Any, Final, NoReturn, cast, get_args

from statifier.budget import DEFAULT_LIMITS, MAX_LIMIT, MacrostepLimits
from statifier.budget import FIELDS as LIMIT_FIELDS
from statifier.chart.model import Machine
from statifier.core._legal import configuration_problem, history_problem
from statifier.core._memo import room
from statifier.core.events import MAX_NAME_LENGTH, Event, EventType
from statifier.core.state import MachineState, StateBuilder, Status, finish
from statifier.datamodel.registry import state_variables, variables_as_stored
from statifier.errors import PositionError
from statifier.values import MAX_DEPTH, MAX_INT_BITS, ValueRefused, brief, measure

MAX_COUNTER: Final = MAX_LIMIT
"""The largest counter a position may carry."""

MAX_ID_LENGTH: Final = MAX_NAME_LENGTH
"""The longest session id, invoke id or queued event name a position may carry."""

MAX_QUEUE: Final = 100_000
"""The longest internal queue a position may carry when its budget does not bound it."""

_EVENT_TYPES: Final[frozenset[str]] = frozenset(get_args(EventType))
_STATUSES: Final = frozenset({"running", "done"})

_EVENT_KEYS: Final = frozenset(
    {"name", "type", "data", "sendid", "origin", "origintype", "invokeid", "caller_context"}
)
_RAW_EVENT_KEYS: Final = _EVENT_KEYS | {"raw"}
"""The keys of an event that carries the message it arrived as (``Event.raw``)."""
_PAYLOAD_KEYS: Final = frozenset(
    {
        "session_id",
        "configuration",
        "internal_queue",
        "history",
        "entered",
        "states_to_invoke",
        "invocations",
        "invoke_counter",
        "send_counter",
        "timer_counter",
        "caller_context",
        "datamodel",
        "running",
        "status",
        "macrostep",
        "microstep",
        "round",
        "trace",
        "max_macrostep_rounds",
        "limits",
    }
)
"""Every ``MachineState`` field but ``machine``, ``routes`` and ``invoke_types``."""


class CorruptPosition(PositionError):
    """The blob claims to be a position for this chart but is truncated, altered or invalid."""


def corrupt(message: str) -> NoReturn:
    """Raise ``CorruptPosition`` for a payload that is wrong as ``message`` says."""
    raise CorruptPosition(f"invalid payload: {message}")


def _keys(obj: Any, expected: frozenset[str], where: str) -> dict[str, Any]:
    if type(obj) is dict and len(obj) == len(expected) and obj.keys() <= expected:
        return obj
    if not isinstance(obj, dict):
        corrupt(f"{where} is a {_kind(obj)}, not an object")
    keys = set(obj)
    if keys != expected:
        missing = sorted(expected - keys)
        extra = sorted(keys - expected)
        corrupt(f"{where} keys: missing {missing}, unexpected {extra}")
    return obj


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _counter(obj: dict[str, Any], key: str) -> int:
    value = obj[key]
    if type(value) is not int:
        corrupt(f"{key} is a {_kind(value)}, not an integer")
    if value < 0:
        corrupt(f"{key} is negative ({value})")
    if value > MAX_COUNTER:
        corrupt(f"{key} is larger than {MAX_COUNTER}")
    return value


def _flag(obj: dict[str, Any], key: str) -> bool:
    value = obj[key]
    if not isinstance(value, bool):
        corrupt(f"{key} is a {_kind(value)}, not a boolean")
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        corrupt(f"{where} is a {_kind(value)}, not a string")
    if len(value) > MAX_ID_LENGTH:
        corrupt(f"{where} is longer than {MAX_ID_LENGTH} characters")
    return value


def _optional_text(value: Any, where: str) -> str | None:
    return None if value is None else _text(value, where)


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        corrupt(f"{where} is a {_kind(value)}, not a list")
    return value


def _index(value: Any, count: int, where: str) -> int:
    if type(value) is not int:
        corrupt(f"{where} is a {_kind(value)}, not a state index")
    if not 0 <= value < count:
        corrupt(f"{where} = {value} is not a state index of this chart (0..{count - 1})")
    return value


def _ascending(values: list[Any], where: str) -> None:
    if any(a >= b for a, b in pairwise(values)):
        corrupt(f"{where} is not strictly ascending")


def _indexes(value: Any, count: int, where: str) -> list[int]:
    items = _list(value, where)
    for i, item in enumerate(items):
        if type(item) is not int or not 0 <= item < count:
            _index(item, count, f"{where}[{i}]")
    return items


def decode_event(obj: Any, where: str) -> Event:
    """An ``Event`` from its payload object (every field present, ``raw`` where an I/O
    processor's message set it); ``CorruptPosition``."""
    if type(obj) is dict and "raw" in obj:
        fields = _keys(obj, _RAW_EVENT_KEYS, where)
        raw = fields["raw"]
        if not isinstance(raw, str):
            corrupt(f"{where}.raw is a {_kind(raw)}, not a string")
    else:
        fields = _keys(obj, _EVENT_KEYS, where)
        raw = None
    kind = fields["type"]
    if not isinstance(kind, str) or kind not in _EVENT_TYPES:
        corrupt(f"{where}.type is {kind!r}, not one of {sorted(_EVENT_TYPES)}")
    return Event(
        name=_text(fields["name"], f"{where}.name"),
        type=cast(EventType, kind),
        data=fields["data"],
        sendid=_optional_text(fields["sendid"], f"{where}.sendid"),
        origin=_optional_text(fields["origin"], f"{where}.origin"),
        origintype=_optional_text(fields["origintype"], f"{where}.origintype"),
        invokeid=_optional_text(fields["invokeid"], f"{where}.invokeid"),
        caller_context=fields["caller_context"],
        raw=raw,
    )


SHAPE_KEYS: Final = frozenset(
    {
        "configuration",
        "entered",
        "history",
        "limits",
        "max_macrostep_rounds",
        "running",
        "states_to_invoke",
        "status",
        "trace",
    }
)
"""The members of a payload that say where the execution is in its chart: checked against
the chart alone (``decode_shape``), so a host may judge equal ones once."""

VALUE_KEYS: Final = _PAYLOAD_KEYS - SHAPE_KEYS
"""The other members: the execution's own values (session id, counters, datamodel,
queue, invocations), checked per position (``decode_values``)."""


class Shape:
    """The shape members of a payload, checked and converted (``decode_shape``)."""

    __slots__ = (
        "configuration",
        "entered",
        "history",
        "limits",
        "rounds",
        "running",
        "states_to_invoke",
        "status",
        "trace",
        "unread",
        "variables_as_stored",
    )

    configuration: frozenset[int]
    entered: frozenset[int]
    history: dict[int, tuple[int, ...]]
    limits: MacrostepLimits
    """The stored budgets, not yet held against a host's ceiling (``decode_values`` does)."""
    rounds: int | None
    running: bool
    states_to_invoke: tuple[int, ...]
    status: Status
    trace: bool
    unread: int
    """``unread_length(limits)``: a values line no longer than this ``fits`` unread."""
    variables_as_stored: bool
    """Whether the machine's states hold the stored datamodel ``dict`` itself
    (``state_variables`` would hand it back): known once per shape, not asked per load."""


class Values:
    """The value members of a payload that ``decode_values`` converts; the others (session
    id, counters, datamodel, caller context) are checked and usable as they are."""

    __slots__ = ("invocations", "queue")

    invocations: dict[tuple[int, int], str]
    queue: tuple[Event, ...]


def decode_payload(
    obj: Any,
    machine: Machine,
    invoke_types: frozenset[str] | None,
    routes: Container[str] | None,
    max_limits: MacrostepLimits | None,
    text: str | bytes | None = None,
) -> MachineState:
    """Build the state a payload describes, or raise ``CorruptPosition`` saying what is wrong.

    ``obj`` is a decoded payload of the current format (see the module docstring);
    ``max_limits`` is the ceiling on the stored budgets (None: no ceiling); ``text`` is
    the JSON text ``obj``'s datamodel was decoded from, when it was (it spares measuring
    the datamodel value by value when the text is small enough to vouch for it, ``fits``).
    Every position this module (and ``import_position``) makes passes through here.
    """
    payload = _keys(obj, _PAYLOAD_KEYS, "the payload")
    shape = decode_shape(payload, machine)
    values = decode_values(payload, shape, machine, max_limits, text)
    return build_state(machine, shape, values, payload, invoke_types, routes)


def build_state(
    machine: Machine,
    shape: Shape,
    values: Values,
    payload: dict[str, Any],
    invoke_types: frozenset[str] | None,
    routes: Container[str] | None,
) -> MachineState:
    """The state of a checked payload: ``shape`` and ``values`` as ``decode_shape`` and
    ``decode_values`` made them, the members they leave as they are read from ``payload``."""
    state: Any = object.__new__(StateBuilder)
    state.machine = machine
    state.session_id = payload["session_id"]
    state.configuration = shape.configuration
    state.internal_queue = values.queue
    state.history = dict(shape.history) if shape.history else {}
    state.entered = shape.entered
    state.states_to_invoke = shape.states_to_invoke
    state.invocations = values.invocations
    state.invoke_counter = payload["invoke_counter"]
    state.send_counter = payload["send_counter"]
    state.timer_counter = payload["timer_counter"]
    state.caller_context = payload["caller_context"]
    state.datamodel = state_variables(machine, payload["datamodel"])
    state.running = shape.running
    state.status = shape.status
    state.macrostep = payload["macrostep"]
    state.microstep = payload["microstep"]
    state.round = payload["round"]
    state.trace = shape.trace
    state.max_macrostep_rounds = shape.rounds
    state.invoke_types = invoke_types
    state.routes = routes
    state.limits = shape.limits
    state._datamodel_bound = None
    return finish(state)


def decode_parts(
    obj: Any,
    machine: Machine,
    max_limits: MacrostepLimits | None,
    text: str | bytes | None = None,
    *,
    from_json: bool = True,
) -> tuple[Shape, Values]:
    """Check a whole payload against ``machine`` (shape and meaning) and convert its
    members, or raise ``CorruptPosition`` saying what is wrong (see ``decode_values`` for
    ``text`` and ``from_json``)."""
    payload = _keys(obj, _PAYLOAD_KEYS, "the payload")
    shape = decode_shape(payload, machine)
    return shape, decode_values(payload, shape, machine, max_limits, text, from_json=from_json)


def decode_shape(payload: dict[str, Any], machine: Machine) -> Shape:
    """Check the shape members of ``payload`` against ``machine`` alone and convert them,
    or raise ``CorruptPosition``. ``payload`` holds at least ``SHAPE_KEYS``; the budgets
    are checked for range, not against a host's ceiling."""
    shape = Shape()
    count = len(machine.states)

    status = payload["status"]
    running = payload["running"]
    if type(status) is not str or running is not (status == "running") or status not in _STATUSES:
        if not isinstance(status, str) or status not in _STATUSES:
            corrupt(f"status is {brief(status)}, not 'running' or 'done'")
        running = _flag(payload, "running")
        if running != (status == "running"):
            corrupt(f"running is {running} but status is {status!r}")
    shape.running = running
    shape.status = "done" if status == "done" else "running"

    configuration = _ascending_indexes(payload["configuration"], count, "configuration")
    if running:
        _problem(legal_configuration(machine, configuration), "configuration")
    elif configuration:
        corrupt("a finished execution has active states")
    entered = _ascending_indexes(payload["entered"], count, "entered")
    active = shape.configuration = frozenset(configuration)
    shape.entered = frozenset(entered)
    if not active <= shape.entered:
        corrupt("an active state is missing from entered")
    states_to_invoke = payload["states_to_invoke"]
    if states_to_invoke != []:
        _indexes(states_to_invoke, count, "states_to_invoke")
        if len(set(states_to_invoke)) != len(states_to_invoke):
            corrupt("states_to_invoke lists a state twice")
        if running and not active.issuperset(states_to_invoke):
            corrupt("states_to_invoke lists a state that is not active")
        shape.states_to_invoke = tuple(states_to_invoke)
    else:
        shape.states_to_invoke = ()

    history = payload["history"]
    shape.history = {} if history == [] else decode_history(history, machine)
    shape.limits = limits = _decode_limits(payload["limits"])
    shape.unread = unread_length(limits)
    shape.variables_as_stored = variables_as_stored(machine)
    rounds = payload["max_macrostep_rounds"]
    if rounds is not None and (type(rounds) is not int or not 1 <= rounds <= MAX_LIMIT):
        corrupt(
            f"max_macrostep_rounds is {brief(rounds)}, not an integer in 1..{MAX_LIMIT} or null"
        )
    shape.rounds = rounds
    shape.trace = _flag(payload, "trace")
    return shape


def decode_values(
    payload: dict[str, Any],
    shape: Shape,
    machine: Machine,
    max_limits: MacrostepLimits | None,
    text: str | bytes | None = None,
    *,
    from_json: bool = True,
) -> Values:
    """Check the value members of ``payload`` (at least ``VALUE_KEYS``) for the execution
    ``shape`` describes, and its budgets against the host's ceiling ``max_limits`` (None:
    none), or raise ``CorruptPosition``.

    ``text``, when given, is JSON text that holds the datamodel written out (the text it
    was decoded from, or the datamodel as ``dumps`` encoded it); ``from_json`` says the
    datamodel was decoded from JSON (so it holds only JSON types)."""
    values = Values()
    limits = shape.limits
    if max_limits is not None and limits is not max_limits:
        _check_ceiling(limits, max_limits)
    invocations = payload["invocations"]
    values.invocations = (
        {}
        if invocations == []
        else decode_invocations(invocations, machine.states, shape.configuration)
    )

    events = payload["internal_queue"]
    if events == []:
        values.queue = ()
    else:
        events = _list(events, "internal_queue")
        queue_limit = MAX_QUEUE if limits.internal_events is None else limits.internal_events
        if len(events) > queue_limit + _QUEUE_SLACK:
            corrupt(f"the internal queue holds {len(events)} events (the limit is {queue_limit})")
        values.queue = tuple(
            decode_event(event, f"internal_queue[{i}]") for i, event in enumerate(events)
        )

    datamodel = payload["datamodel"]
    if not isinstance(datamodel, dict):
        corrupt(f"datamodel is a {_kind(datamodel)}, not an object")
    if not (
        text is not None
        and fits(text, MAX_LIMIT if limits.datamodel_bytes is None else limits.datamodel_bytes)
        and (from_json or json_typed(datamodel))
    ):
        # What the text cannot vouch for is measured value by value (and refused there).
        if not all(isinstance(name, str) for name in datamodel):
            corrupt("datamodel has a non-string variable name")
        check_datamodel(datamodel, limits)

    session_id = payload["session_id"]
    if (not isinstance(session_id, str) or not 0 < len(session_id) <= MAX_ID_LENGTH) and not _text(
        session_id, "session_id"
    ):
        corrupt("session_id is empty")
    for name in _COUNTERS:
        value = payload[name]
        if type(value) is not int or not 0 <= value <= MAX_COUNTER:
            _counter(payload, name)
    return values


def _ascending_indexes(value: Any, count: int, where: str) -> list[int]:
    """``value``, a strictly ascending list of state indexes (or ``CorruptPosition``)."""
    if type(value) is not list:
        _list(value, where)
    previous = -1
    for item in value:
        if type(item) is not int or not previous < item < count:
            _indexes(value, count, where)
            _ascending(value, where)
        previous = item
    return cast(list[int], value)


def decode_history(obj: Any, machine: Machine) -> dict[int, tuple[int, ...]]:
    """The ``history`` member: ``[[history_state, [states...]], ...]``, ascending by key."""
    states = machine.states
    count = len(states)
    history: dict[int, tuple[int, ...]] = {}
    history_keys: list[int] = []
    for i, pair in enumerate(_list(obj, "history")):
        where = f"history[{i}]"
        if not isinstance(pair, list) or len(pair) != 2:
            corrupt(f"{where} is not a [history_state, [states...]] pair")
        key = _index(pair[0], count, f"{where}[0]")
        if states[key].kind != "history":
            corrupt(f"{where}[0] = {key} is not a history state")
        history_keys.append(key)
        recorded = tuple(_indexes(pair[1], count, f"{where}[1]"))
        _problem(_legal_history(machine, key, recorded), where)
        history[key] = recorded
    _ascending(history_keys, "history")
    return history


def decode_invocations(
    obj: Any, states: tuple[Any, ...], active: frozenset[int]
) -> dict[tuple[int, int], str]:
    """The ``invocations`` member: ``[[state, invoke_index, invoke_id], ...]``, ascending by
    key, of active states, with distinct non-empty ids."""
    count = len(states)
    invocations: dict[tuple[int, int], str] = {}
    invocation_keys: list[tuple[int, int]] = []
    for i, triple in enumerate(_list(obj, "invocations")):
        where = f"invocations[{i}]"
        if not isinstance(triple, list) or len(triple) != 3:
            corrupt(f"{where} is not a [state, invoke_index, invoke_id] triple")
        s = _index(triple[0], count, f"{where}[0]")
        n = triple[1]
        if type(n) is not int or not 0 <= n < len(states[s].invokes):
            corrupt(f"{where}[1] = {brief(n)} is not an invoke index of state {states[s].id!r}")
        if s not in active:
            corrupt(f"{where}: state {states[s].id!r} is not active")
        invocation_keys.append((s, n))
        invoke_id = _text(triple[2], f"{where}[2]")
        if not invoke_id:
            corrupt(f"{where}[2] is an empty invoke id")
        invocations[(s, n)] = invoke_id
    _ascending(invocation_keys, "invocations")
    if len(set(invocations.values())) != len(invocations):
        corrupt("two live invocations share an invoke id")
    return invocations


_COUNTERS: Final = (
    "invoke_counter",
    "send_counter",
    "timer_counter",
    "macrostep",
    "microstep",
    "round",
)

_CHECKS: Final = "positions"
"""The key, in a machine's ``_cache``, of the memo of configurations and history records
already judged (they are judged again once the memo fills)."""

_CHECKS_LIMIT: Final = 1024


def legal_configuration(machine: Machine, configuration: list[int]) -> str | None:
    """``configuration_problem``, remembered per machine and configuration."""
    memo = _judgements(machine)
    key = ("configuration", *configuration)
    problem = memo.get(key, _UNJUDGED)
    if problem is _UNJUDGED:
        problem = configuration_problem(machine.states, configuration)
        _remember(memo, key, problem)
    return cast(str | None, problem)


_UNJUDGED: Final = object()


def _legal_history(machine: Machine, history: int, recorded: tuple[int, ...]) -> str | None:
    """``history_problem``, remembered per machine, history state and record."""
    return _judged(
        machine,
        ("history", history, *recorded),
        lambda: history_problem(machine.states, history, recorded),
    )


def _judged(machine: Machine, key: tuple[Any, ...], judge: Callable[[], str | None]) -> str | None:
    """What ``judge`` says about ``key``, asked once per machine (until the memo fills)."""
    memo = _judgements(machine)
    if key not in memo:
        _remember(memo, key, judge())
    return memo[key]


def _judgements(machine: Machine) -> dict[tuple[Any, ...], str | None]:
    memo: dict[tuple[Any, ...], str | None] = machine._cache.setdefault(_CHECKS, {})
    return memo


def _remember(
    memo: dict[tuple[Any, ...], str | None], key: tuple[Any, ...], problem: str | None
) -> None:
    if len(memo) >= room(_CHECKS_LIMIT, len(key)):
        memo.clear()
    memo[key] = problem


_QUEUE_SLACK: Final = 64
"""Events past the queue limit a position may hold: a call that exhausts its budget still
queues the error events of the blocks it aborts."""


def _problem(problem: str | None, where: str) -> None:
    if problem is not None:
        corrupt(f"{where}: {problem}")


def _decode_limits(obj: Any) -> MacrostepLimits:
    """The budgets a ``limits`` member stores (one shared object per set of values), checked
    for range (``decode_values`` holds them against the host's ceiling)."""
    if type(obj) is dict and len(obj) == len(LIMIT_FIELDS) and obj.keys() <= _LIMIT_KEYS:
        # The common case: budgets read before.
        stored = _limit_items(obj)
        for value in stored:
            if value is not None and (type(value) is not int or not 0 < value <= MAX_LIMIT):
                break
        else:
            known = _LIMITS.get(stored)
            if known is not None:
                return known
    fields = _keys(obj, _LIMIT_KEYS, "limits")
    values: dict[str, int | None] = {}
    for name in LIMIT_FIELDS:
        value = fields[name]
        if value is not None and (type(value) is not int or not 1 <= value <= MAX_LIMIT):
            corrupt(f"limits.{name} is {brief(value)}, not an integer in 1..{MAX_LIMIT} or null")
        values[name] = value
    key = tuple(values.values())
    limits = _LIMITS.get(key)
    if limits is None:
        limits = MacrostepLimits(**values)
        if len(_LIMITS) >= _CHECKS_LIMIT:
            _LIMITS.clear()
        _LIMITS[key] = limits
    return limits


def _check_ceiling(limits: MacrostepLimits, ceiling: MacrostepLimits) -> None:
    """Refuse budgets that bound a macrostep less than the host's ``ceiling`` does."""
    if _within(limits, ceiling):
        return
    for name in LIMIT_FIELDS:
        value = getattr(limits, name)
        most = getattr(ceiling, name)
        if most is not None and (value is None or value > most):
            corrupt(
                f"limits.{name} is {'unbounded' if value is None else value}; "
                f"this host allows at most {most} (loads(max_limits=...))"
            )


_LIMIT_KEYS: Final = frozenset(LIMIT_FIELDS)
_limit_items: Final = operator.itemgetter(*LIMIT_FIELDS)
limit_values: Final = operator.attrgetter(*LIMIT_FIELDS)
"""The budgets of a ``MacrostepLimits`` as a tuple, in ``LIMIT_FIELDS`` order."""


def _within(limits: MacrostepLimits, ceiling: MacrostepLimits) -> bool:
    """Whether every budget of ``limits`` is bounded at most as ``ceiling`` bounds it."""
    return all(
        most is None or (value is not None and value <= most)
        for value, most in zip(limit_values(limits), limit_values(ceiling), strict=True)
    )


_LIMITS: dict[tuple[int | None, ...], MacrostepLimits] = {
    tuple(getattr(DEFAULT_LIMITS, name) for name in LIMIT_FIELDS): DEFAULT_LIMITS
}
"""Budgets read before, by value: positions share one ``MacrostepLimits`` per set of values
(the default one in the common case) instead of building one per load."""


TEXT_RATIO: Final = 12
"""``measure`` counts at most this many bytes per character of a value's JSON text: a
string with a character past U+FFFF counts 12 per character (a float 24 for at least
3 characters, the rest less), keys and separators less than their own characters."""

SHORT_DIGITS: Final = int(MAX_INT_BITS * math.log10(2))
"""Every integer written in at most this many digits has at most ``MAX_INT_BITS`` bits."""

SHORT_TEXT: Final = min(2 * MAX_DEPTH + 1, SHORT_DIGITS)
"""The longest JSON text too short to hold a value nested past ``MAX_DEPTH`` or an integer
of more than ``MAX_INT_BITS`` bits (``fits`` need not read it)."""

_LONG_NUMBER: Final = re.compile(f"[0-9]{{{SHORT_DIGITS + 1}}}")
_LONG_NUMBER_BYTES: Final = re.compile(f"[0-9]{{{SHORT_DIGITS + 1}}}".encode("ascii"))


def fits(text: str | bytes, cap: int) -> bool:
    """Whether ``text``, JSON text (or its UTF-8 bytes) holding a datamodel of JSON-typed
    values with no NaN or infinite float, vouches for every value ``check_datamodel``
    would accept: no deeper than ``MAX_DEPTH`` (it has no more brackets than that), no
    integer of more than ``MAX_INT_BITS`` bits (no run of digits long enough), and no more
    than ``cap`` bytes measured (``TEXT_RATIO`` times the text's length; a character is at
    least one byte). False is no verdict: the values are measured one by one then.

    A text of at most ``SHORT_TEXT`` characters vouches without being read: a value
    nested past ``MAX_DEPTH`` needs ``MAX_DEPTH + 1`` opening brackets and as many closing
    ones in the text, and a long integer more digits than the whole text holds."""
    size = len(text)
    if size <= SHORT_TEXT:
        return size * TEXT_RATIO <= cap
    if isinstance(text, bytes):
        return (
            size * TEXT_RATIO <= cap
            and text.count(b"[") + text.count(b"{") <= MAX_DEPTH
            and (size <= SHORT_DIGITS or _LONG_NUMBER_BYTES.search(text) is None)
        )
    return (
        size * TEXT_RATIO <= cap
        and text.count("[") + text.count("{") <= MAX_DEPTH
        and (size <= SHORT_DIGITS or _LONG_NUMBER.search(text) is None)
    )


def datamodel_cap(limits: MacrostepLimits) -> int:
    """The datamodel cap of ``limits`` (``MAX_LIMIT`` when it has none)."""
    cap = limits.datamodel_bytes
    return MAX_LIMIT if cap is None else cap


def unread_length(limits: MacrostepLimits) -> int:
    """The longest text ``fits`` vouches for without reading it under ``limits``' cap:
    ``len(text) <= unread_length(limits)`` is ``fits``' first case, both conditions in
    one comparison (remembered with a shape, so each plain path makes only that one)."""
    return min(SHORT_TEXT, datamodel_cap(limits) // TEXT_RATIO)


_SCALARS: Final[frozenset[type]] = frozenset({str, int, bool, type(None)})


def json_typed(value: Any, keys: bool = True) -> bool:  # noqa: C901 - a branch per JSON kind
    """Whether ``value`` holds only ``str``, ``int``, finite ``float``, ``bool``, ``None``,
    ``list`` and ``dict`` with ``str`` keys (exactly those types, as ``measure`` wants).
    It recurses: ``value`` is no deeper than ``MAX_DEPTH`` (``fits`` said so first).

    ``keys=False`` leaves the keys unread, for a value orjson has just written with
    ``OPT_PASSTHROUGH_SUBCLASS`` (``_format3``): it writes no key but an exact ``str``."""
    kind = type(value)
    children: Iterable[Any]
    if kind is dict:
        if keys:
            for name in value:
                if type(name) is not str:
                    return False
        children = value.values()
    elif kind is list:
        children = value
    elif kind is float:
        return bool(value - value == 0.0)  # NaN and the infinities give NaN
    else:
        return kind in _SCALARS
    for child in children:
        # ``kind in _SCALARS``, spelt out: tests of identity cost less than a hash lookup,
        # and None (an event's fields mostly) needs no type.
        if child is None:
            continue
        kind = type(child)
        if kind is str or kind is int or kind is bool:
            continue
        if kind is float:
            if child - child != 0.0:
                return False
        elif (kind is not dict and kind is not list) or not json_typed(child, keys):
            return False
    return True


def check_datamodel(datamodel: dict[str, Any], limits: MacrostepLimits) -> None:
    """Every value storable; the chart's variables within the datamodel cap."""
    cap = MAX_LIMIT if limits.datamodel_bytes is None else limits.datamodel_bytes
    total = 0
    for name, value in datamodel.items():
        system = name.startswith("_")
        try:
            size, _ = measure(value, MAX_LIMIT if system else max(cap - total, 0))
        except ValueRefused as exc:
            corrupt(f"datamodel[{brief(name)}]: {exc}")
        if not system:
            total += size
