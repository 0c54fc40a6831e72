"""Format 4 and format 3 payloads: the shape line and the values line (ADR 4).

Both formats hold the members of a format 2 payload on two lines of compact JSON,
separated by one ``\\n`` (JSON text never holds a raw newline):

* the **shape** (``_payload.SHAPE_KEYS``): configuration, entered, history, budgets,
  round budget, running, states to invoke, status, trace: where the execution is in its
  chart, judged against the chart alone. An object with sorted keys in both formats;
* the **values** (``_payload.VALUE_KEYS`` and ``standard_system_variables``): the session
  id, the counters, the datamodel, the caller context, the internal queue and the live
  invocations. Format 4 writes them as an array of twelve values in ``VALUE_ORDER`` (the
  order of their names, sorted); format 3 wrote an object with sorted keys.

``standard_system_variables`` is true when the datamodel's ``_ioprocessors``, ``_name``
and ``_sessionid`` hold exactly what the engine gives every session of the chart
(``planner.io_processors``, the chart's name, the session id): they are then left out of
the stored datamodel and put back on load. Otherwise it is false and the datamodel is
stored as it is.

Both lines are written by ``orjson`` (UTF-8, shortest float text, objects with sorted
keys), or, for a value orjson cannot write (an integer past 64 bits, a lone surrogate,
nesting past its limit), by the standard library's encoder (ASCII, ``\\uXXXX`` escapes):
the same state always gives the same bytes. Reading takes a plain path first: the shape
line is judged once per machine and remembered by its bytes (``decode_shape``) with its
CRC-32, which an unkeyed position's digest continues over the values line (both ways:
``plain_parts``, ``read_unkeyed``); the values line is parsed by orjson and must be
exactly what orjson writes back (so it holds no duplicate key and no number orjson would
read differently) with twelve values (or members), and then checked as every payload is
(``decode_values``; the common line, with no queue, no invocations and the standard
system variables left out, under the host's own budgets, by the same checks made in place
in ``_plain_read``). Anything else goes
through the standard library's decoder and the full checks of ``decode_payload``, which
say what is wrong (a format 4 values line that is not an array of twelve values
included). Whatever the plain path accepts, the full one accepts as the same state:
property tests drive both, for both formats.

To carry a new member: add it to ``SHAPE_KEYS`` (checked in ``decode_shape``) or to
``VALUE_KEYS`` (checked in ``decode_values``; its place in the array is its name's in
``VALUE_ORDER``), write it in ``position._encode_state`` and in ``plain_body`` below,
and give the format a new version number (format 4's array has no room for a member
it does not know: the version says how many values there are).
"""

from __future__ import annotations

import operator
import zlib
from binascii import hexlify
from collections.abc import Container
from typing import Any, Final

import orjson

from statifier.budget import FIELDS as LIMIT_FIELDS
from statifier.budget import MAX_LIMIT, MacrostepLimits
from statifier.chart.model import Machine
from statifier.core._json import decode_json, encode_json
from statifier.core._memo import room
from statifier.core._payload import (
    MAX_COUNTER,
    MAX_ID_LENGTH,
    SHAPE_KEYS,
    TEXT_RATIO,
    VALUE_KEYS,
    CorruptPosition,
    Shape,
    build_state,
    corrupt,
    datamodel_cap,
    decode_history,
    decode_invocations,
    decode_payload,
    decode_shape,
    decode_values,
    fits,
    json_typed,
    legal_configuration,
    limit_values,
    unread_length,
)
from statifier.core._run import shared
from statifier.core.algorithm import SYSTEM_VARIABLES
from statifier.core.planner import io_processors
from statifier.core.state import MachineState, StateBuilder
from statifier.datamodel.base import stored_variables
from statifier.datamodel.registry import state_variables

STANDARD: Final = "standard_system_variables"
"""The values member that says the standard system variables are left out."""

IMPLIED: Final = ("_ioprocessors", "_name", "_sessionid")
"""The system variables a payload may leave out (``standard_system_variables``)."""

LINE_VALUE_KEYS: Final = VALUE_KEYS | {STANDARD}
"""The members of the values line."""

VALUE_ORDER: Final = tuple(sorted(LINE_VALUE_KEYS))
"""The members of the values line in the order of its array in format 4 (the order of
format 3's sorted keys): ``caller_context``, ``datamodel``, ``internal_queue``,
``invocations``, ``invoke_counter``, ``macrostep``, ``microstep``, ``round``,
``send_counter``, ``session_id``, ``standard_system_variables``, ``timer_counter``."""

_OPTIONS: Final = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)
"""Sorted keys; a subclass of a JSON type, a dataclass or a date is not written natively
(with no ``default``, orjson then raises and the standard library's encoder decides)."""

_EXACT: Final = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)
"""``_OPTIONS`` unsorted, for a write that only vouches for types: orjson refuses the same
keys and values either way, and sorting them costs a fifth of that write."""

_SHAPES: Final = "shapes"
"""The key, in a machine's ``_cache``, of the shape lines already judged, by their bytes
(each with the CRC-32 of the line and its newline)."""

_SHAPES_LIMIT: Final = 1024


# -- writing -------------------------------------------------------------------------------


def body(payload: dict[str, Any], machine: Machine) -> bytes:
    """The format 4 payload of ``payload``, a checked payload dict (every member of
    ``_payload``, the datamodel whole) of an execution of ``machine``."""
    shape = {name: payload[name] for name in SHAPE_KEYS}
    values = {name: payload[name] for name in VALUE_KEYS}
    datamodel = payload["datamodel"]
    standard = standard_system_variables(datamodel, payload["session_id"], machine)
    values["datamodel"] = _without_implied(datamodel) if standard else datamodel
    values[STANDARD] = standard
    row = [values[name] for name in VALUE_ORDER]
    return b"".join((encode_line(shape), b"\n", encode_line(row)))


def encode_line(obj: Any) -> bytes:
    """One line: compact JSON with sorted keys, by orjson when it can write ``obj``."""
    try:
        return orjson.dumps(obj, option=_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError included
        return encode_json(obj).encode("ascii")


def standard_system_variables(datamodel: Any, session_id: Any, machine: Machine) -> bool:
    """Whether ``datamodel`` holds the standard ``_ioprocessors``, ``_name`` and
    ``_sessionid`` of session ``session_id`` of ``machine`` (the engine's own values,
    which a payload may leave out). Equal values of other types are the caller's to refuse
    (both writers hold the datamodel to exact JSON types)."""
    if type(datamodel) is not dict or type(session_id) is not str:
        return False
    name = datamodel.get("_name", _ABSENT)
    sid = datamodel.get("_sessionid")
    processors = datamodel.get("_ioprocessors")
    return (
        (sid is session_id or (type(sid) is str and sid == session_id))
        and (name is machine.name or (type(name) is str and name == machine.name))
        and type(processors) is dict
        and processors == _standard_processors(session_id)
    )


_ABSENT: Final = object()


def _standard_processors(session_id: str) -> dict[str, Any]:
    """``io_processors(session_id)``, remembered in ``_STANDARD`` (``plain_parts`` and
    ``_plain_read`` read it there first). A load hands it out as the state's
    ``_ioprocessors``, shared as every state of a session already shares the one its
    session started with: nothing changes it in place (a chart cannot assign into a system
    variable, and the Python datamodel copies what it writes into). ``plain_parts`` then
    knows it by identity, with no comparison and no check of its types."""
    found = _STANDARD.get(session_id)
    if found is None:
        if len(_STANDARD) >= _STANDARD_LIMIT:
            _STANDARD.clear()
        found = _STANDARD[session_id] = io_processors(session_id)
    return found


_STANDARD: Final[dict[str, dict[str, Any]]] = {}
"""``_standard_processors`` by session id: a plain dict, since an ``lru_cache`` call costs
twice a lookup (the plain path of ``dumps`` compares with one each time)."""

_STANDARD_LIMIT: Final = 256


def _without_implied(datamodel: dict[str, Any]) -> dict[str, Any]:
    stored = datamodel.copy()
    for name in IMPLIED:
        del stored[name]
    return stored


def _counters_fit(a: Any, b: Any, c: Any, d: Any, e: Any, f: Any) -> bool:
    """``_payload``'s check of the six counters (ints from 0 to ``MAX_COUNTER``), for the
    plain paths: exact ints, then one range check of their bitwise or. Each is at most the
    or of all (which has every bit of each), and the or is negative when one of them is:
    the or in range puts all six in range. Out of range, each may still be (``2**62 | 1``):
    False is no verdict, the checked path decides. (``min`` and ``max`` cost more than all
    the rest: their keyword parsing.) One owner for both directions, though the call costs
    about 500 instructions each way (callgrind), 1.3% of ``dumps`` + ``loads`` on the card
    chart."""
    # Tested in an ``if``, not returned: a returned ``and`` chain keeps each operand on
    # the stack (two more instructions of the interpreter per test).
    if (
        type(a) is not int
        or type(b) is not int
        or type(c) is not int
        or type(d) is not int
        or type(e) is not int
        or type(f) is not int
    ):
        return False
    return 0 <= a | b | c | d | e | f <= MAX_COUNTER


def plain_body(state: MachineState) -> bytes | None:
    """The format 4 payload of ``state`` when it is plainly a valid position, the way the
    engine makes them: index sets as frozensets, no queued events, every field of the type
    and in the range ``loads`` wants, a legal configuration and history, a datamodel its
    written text vouches for (``fits``) of exact JSON types. None when anything is in
    doubt: the checked path of ``position.dumps`` then writes the same bytes or says what
    is wrong (tests check that it accepts whatever this accepts)."""
    parts = plain_parts(state)
    return None if parts is None else parts[0] + parts[2]


def plain_parts(state: MachineState) -> tuple[bytes, int, bytes] | None:
    """``plain_body`` in its parts: the shape line with its newline, the CRC-32 of that
    (``zlib.crc32``), and the values line. The shape line and its CRC are remembered
    together: a plain digest of the payload is that CRC continued over the values line
    (``zlib.crc32(values_line, crc)``), the same number for fewer bytes."""
    try:
        machine = state.machine
        running = state.running
        status = state.status
        trace = state.trace
        rounds = state.max_macrostep_rounds
        if (
            state.internal_queue
            or (running is not True and running is not False)
            or type(status) is not str
            or (trace is not True and trace is not False)
            or (rounds is not None and (type(rounds) is not int or not 0 < rounds <= MAX_LIMIT))
        ):
            return None
        configuration = state.configuration
        entered = state.entered
        to_invoke = state.states_to_invoke
        limits = state.limits
        # ``_plain_shape_line``'s memo, read inline: once per dump.
        memo: dict[tuple[Any, ...], tuple[Any, ...]] | None = machine._cache.get(_SHAPE_LINES)
        known = (
            None
            if memo is None or state.history
            else memo.get(
                (configuration, entered, to_invoke, id(limits), rounds, running, status, trace)
            )
        )
        if (
            known is not None
            and known[0] is configuration
            and known[1] is entered
            and known[2] is to_invoke
            and known[3] is limits
        ):
            shape_line: bytes = known[4]
            shape_check: int = known[5]
            unread: int = known[6]
        else:
            judged = _plain_shape_line(state, running, status, trace, rounds)
            if judged is None:
                return None
            shape_line, shape_check, unread = judged
        invocations: Any = state.invocations
        invocations = _plain_invocations(invocations, machine, configuration) if invocations else []
        session_id = state.session_id
        if type(session_id) is not str or not 0 < len(session_id) <= MAX_ID_LENGTH:
            return None
        invoke_counter = state.invoke_counter
        send_counter = state.send_counter
        timer_counter = state.timer_counter
        macrostep = state.macrostep
        microstep = state.microstep
        round_ = state.round
        if not _counters_fit(
            invoke_counter, send_counter, timer_counter, macrostep, microstep, round_
        ):
            return None
        variables: Any = state.datamodel
        if type(variables) is dict:
            datamodel = variables
            typed = False
        else:
            datamodel = stored_variables(variables)
            if type(datamodel) is not dict:
                return None
            # Only a view of the engine's own state vouches (``StoredVariables``).
            typed = variables.chart_json_typed is True
        # ``standard_system_variables``, inlined (a dict and a string here): once per dump.
        try:
            # Subscripts, not ``get``: no method call (a missing one: none is left out).
            name = datamodel["_name"]
            sid = datamodel["_sessionid"]
            processors = datamodel["_ioprocessors"]
        except KeyError:
            sid = name = processors = None
        known = _STANDARD.get(session_id)
        # Tested in an ``if``, not assigned: an assigned ``and`` chain keeps each operand on
        # the stack (two more instructions of the interpreter per test).
        if (
            (sid is session_id or (type(sid) is str and sid == session_id))
            and (name is machine.name or (type(name) is str and name == machine.name))
            and (
                # The very dict a load handed out (``_plain_read``): ``io_processors``' own.
                (processors is known and known is not None)
                or (
                    type(processors) is dict
                    # The memo read in place: a lookup costs less than a call.
                    and processors == (known or _standard_processors(session_id))
                    # Left out, the standard processors must hold exact types, as
                    # ``json_typed`` would say, without its walk: orjson writes no key but
                    # an exact ``str`` and, with ``OPT_PASSTHROUGH_SUBCLASS``, no subclass
                    # of ``str`` or ``dict`` (it raises ``TypeError``: the checked path then
                    # decides); of what else it writes (a tuple, a UUID, an enum) nothing
                    # equals a dict of strings. Its bytes are never empty.
                    and orjson.dumps(processors, option=_EXACT)
                )
            )
        ):
            standard = True
            stored = datamodel.copy()  # ``_without_implied``, inlined: once per dump
            del stored["_ioprocessors"], stored["_name"], stored["_sessionid"]
        else:
            standard = False
            stored = datamodel
        context = state.caller_context
        # orjson refuses cycles, values past its nesting limit and what it cannot write
        # faithfully (TypeError: the checked path then decides), keys that are not exact
        # strings included; NaN and types it writes as something else (a tuple, a UUID,
        # an enum) are found by the walks below, which need not read keys, once ``fits``
        # bounded the nesting.
        values_line = orjson.dumps(
            [  # ``VALUE_ORDER``
                context,
                stored,
                [],
                invocations,
                invoke_counter,
                macrostep,
                microstep,
                round_,
                send_counter,
                session_id,
                standard,
                timer_counter,
            ],
            option=_OPTIONS,
        )
        if not (
            # ``fits``, its first case in one comparison (a short text vouches unread)
            (len(values_line) <= unread or fits(values_line, datamodel_cap(limits)))
            and (_system_typed(stored, standard) if typed else json_typed(stored, False))
            and (context is None or json_typed(context, False))
        ):
            return None
        return shape_line, shape_check, values_line
    except (CorruptPosition, AttributeError, TypeError, ValueError, RecursionError):
        return None


def _plain_invocations(
    invocations: dict[tuple[int, int], str], machine: Machine, configuration: frozenset[int]
) -> list[list[Any]]:
    """The ``invocations`` member of a state's live ``invocations``, checked as ``loads``
    checks it (``CorruptPosition``, or whatever the sort raises, otherwise)."""
    members = [[s, n, name] for (s, n), name in sorted(invocations.items())]
    decode_invocations(members, machine.states, configuration)
    return members


def _system_typed(stored: dict[str, Any], standard: bool) -> bool:
    """``json_typed(stored)`` for a datamodel whose chart variables its view vouches for
    (``StoredVariables.chart_json_typed``): the system variables' walk alone. With the
    standard ones left out (``standard``, their types checked already) only ``_event``."""
    if standard:
        return json_typed(stored.get("_event"), False)
    return all(json_typed(stored.get(name), False) for name in SYSTEM_VARIABLES)


_SHAPE_LINES: Final = "shape lines"
"""The key, in a machine's ``_cache``, of the shape lines ``dumps`` wrote, by the state's
shape fields."""


def _plain_shape_line(
    state: MachineState, running: bool, status: str, trace: bool, rounds: int | None
) -> tuple[bytes, int, int] | None:
    """The shape line of ``state`` (whose flags and round budget the caller checked) with
    its newline, the CRC-32 of that and the ``unread_length`` of its budgets; None if its
    shape is not plainly valid.
    Remembered per machine for the very sets and budgets of the engine's states (they
    share them, ``_run.shared``)."""
    configuration = state.configuration
    entered = state.entered
    to_invoke = state.states_to_invoke
    limits = state.limits
    history = state.history
    memo: dict[tuple[Any, ...], tuple[Any, ...]] | None = state.machine._cache.get(_SHAPE_LINES)
    key = (configuration, entered, to_invoke, id(limits), rounds, running, status, trace)
    if not history and memo is not None:
        known = memo.get(key)
        if (
            known is not None
            and known[0] is configuration
            and known[1] is entered
            and known[2] is to_invoke
            and known[3] is limits
        ):
            return known[4], known[5], known[6]
    judged = _judge_shape(state, running, status, trace, rounds)
    if judged is None:
        return None
    line = judged + b"\n"
    check = zlib.crc32(line)
    unread = unread_length(limits)
    if not history:
        memo = state.machine._cache.setdefault(_SHAPE_LINES, {})
        if len(memo) >= room(_SHAPES_LIMIT, len(line)):
            memo.clear()
        memo[key] = (configuration, entered, to_invoke, limits, line, check, unread)
    return line, check, unread


def _judge_shape(
    state: MachineState, running: bool, status: str, trace: bool, rounds: int | None
) -> bytes | None:
    machine = state.machine
    count = len(machine.states)
    configuration = state.configuration
    entered = state.entered
    if (
        type(configuration) is not frozenset
        or type(entered) is not frozenset
        or not configuration <= entered
    ):
        return None
    active = sorted(configuration)
    visited = sorted(entered)
    if not (_plain_indexes(active, count) and _plain_indexes(visited, count)):
        return None
    if running and status == "running":
        if legal_configuration(machine, active) is not None:
            return None
    elif running or status != "done" or active:
        return None
    to_invoke = state.states_to_invoke
    if to_invoke and (
        type(to_invoke) is not tuple
        or not _plain_indexes(sorted(set(to_invoke)), count)
        or len(set(to_invoke)) != len(to_invoke)
        or (running and not configuration.issuperset(to_invoke))
    ):
        return None
    history: Any = state.history
    if history:
        history = [[key, list(value)] for key, value in sorted(history.items())]
        decode_history(history, machine)
    else:
        history = []
    limits = limit_values(state.limits)
    for value in limits:
        if value is not None and (type(value) is not int or not 0 < value <= MAX_LIMIT):
            return None
    return orjson.dumps(
        {
            "configuration": active,
            "entered": visited,
            "history": history,
            "limits": dict(zip(LIMIT_FIELDS, limits, strict=True)),
            "max_macrostep_rounds": rounds,
            "running": running,
            "states_to_invoke": list(to_invoke),
            "status": status,
            "trace": trace,
        },
        option=_OPTIONS,
    )


def _plain_indexes(indexes: list[Any], count: int) -> bool:
    """Whether the sorted ``indexes`` are exact ints, all state indexes of the chart."""
    for index in indexes:
        if type(index) is not int:
            return False
    return not indexes or (indexes[0] >= 0 and indexes[-1] < count)


# -- reading -------------------------------------------------------------------------------


def read(
    payload: bytes,
    machine: Machine,
    invoke_types: frozenset[str] | None,
    routes: Container[str] | None,
    max_limits: MacrostepLimits | None,
    version: int = 4,
) -> MachineState:
    """The state a format 4 payload (or, ``version`` 3, a format 3 one) describes, or
    ``CorruptPosition`` saying what is wrong."""
    shape_text, newline, values_text = payload.partition(b"\n")
    array = version != 3
    if newline:
        try:
            state = _plain_read(
                shape_text, values_text, machine, invoke_types, routes, max_limits, array
            )
        except CorruptPosition:
            state = None  # the full path says what is wrong
        if state is not None:
            return state
    return _full_read(payload, machine, invoke_types, routes, max_limits, array=array)


def read_unkeyed(
    blob: bytes,
    head: bytes,
    machine: Machine,
    invoke_types: frozenset[str] | None,
    routes: Container[str] | None,
    max_limits: MacrostepLimits | None,
) -> MachineState | None:
    """``read`` of a whole unkeyed format 4 ``blob`` whose header is ``head`` (the lines
    up to the digest's hex digits, ``position._plain_head``) followed by the CRC-32 of the
    payload: checked in one comparison before the payload is read. None when the blob has
    another header or digest (``position.loads`` then checks it line by line and says
    why); else the state, or ``CorruptPosition``.

    The CRC of a shape line judged before is remembered with it (``_learn_shape``): the
    payload's CRC is that one continued over the values line (``zlib.crc32``'s running
    value), the same number for fewer bytes. Looking the line up reads nothing of it, and
    the line the machine last read is compared before the memo is looked in (loads of
    one chart's executions in one configuration share their shape line: a comparison of
    bytes costs less than hashing them)."""
    start = len(head) + _CHECK_DIGITS + 1
    cache = machine._cache
    last: tuple[bytes, tuple[Shape, int], bytes] | None = cache.get(_LAST_SHAPE)
    if last is not None and blob.startswith(last[0], start):
        # The line read last and its newline start the payload: the values line is the
        # rest (no copy of the payload, no partition of it).
        shape_text = last[2]
        values_text = blob[start + len(last[0]) :]
        shape: Shape | None
        shape, crc = last[1]
        check = zlib.crc32(values_text, crc)
    else:
        shape_text, newline, values_text = blob[start:].partition(b"\n")
        if not newline:
            return None
        # ``_remembered_shape``, inlined: once per load.
        memo: dict[bytes, tuple[Shape, int]] | None = cache.get(_SHAPES)
        known = None if memo is None else memo.get(shape_text)
        if known is None:
            shape = None
            check = zlib.crc32(blob[start:])
        else:
            cache[_LAST_SHAPE] = (shape_text + b"\n", known, shape_text)
            shape, crc = known
            check = zlib.crc32(values_text, crc)
    # A plain digest hides nothing: ``==`` is as good as ``compare_digest`` here.
    if blob[:start] != b"".join((head, hexlify(check.to_bytes(4)), b"\n")):
        return None
    try:
        state = _plain_read(
            shape_text,
            values_text,
            machine,
            invoke_types,
            routes,
            max_limits,
            True,
            shape,
        )
    except CorruptPosition:
        state = None  # the full path says what is wrong
    if state is not None:
        return state
    return _full_read(blob[start:], machine, invoke_types, routes, max_limits)


_LAST_SHAPE: Final = "last shape"
"""The key, in a machine's ``_cache``, of the shape line ``read_unkeyed`` last found in
the memo (or ``_learn_shape`` last judged): the line with its newline, what the memo
holds for it, and the line."""

_CHECK_DIGITS: Final = 8
"""The hex digits of a CRC-32 digest line."""


def _remembered_shape(shape_text: bytes, machine: Machine) -> tuple[Shape, int] | None:
    """The shape judged before for ``shape_text`` on ``machine``, with the CRC-32 of the
    line and its newline (``_learn_shape``); None when it was not judged (or forgotten)."""
    memo: dict[bytes, tuple[Shape, int]] | None = machine._cache.get(_SHAPES)
    return None if memo is None else memo.get(shape_text)


def _plain_read(
    shape_text: bytes,
    values_text: bytes,
    machine: Machine,
    invoke_types: frozenset[str] | None,
    routes: Container[str] | None,
    max_limits: MacrostepLimits | None,
    array: bool = True,
    shape: Shape | None = None,
) -> MachineState | None:
    """The state, when both lines are exactly what orjson writes for what it reads in
    them and pass the checks (the full path's); else None (or ``CorruptPosition``): the
    full path decides and says what is wrong. ``array``: the values line is format 4's
    array (else format 3's object). ``shape``: the one remembered for ``shape_text``,
    when the caller has looked it up."""
    if shape is None:
        known = _remembered_shape(shape_text, machine)
        if known is None:
            shape = _learn_shape(shape_text, machine)
            if shape is None:
                return None
        else:
            shape = known[0]
    # ``_canonical_object``, inlined: once per load.
    try:
        values = orjson.loads(values_text)
        if (
            type(values) is not (list if array else dict)
            or len(values) != _VALUE_COUNT
            # Written back in the order read (no key sorted): a duplicate key, a number
            # orjson reads otherwise (an integer past 64 bits reads as a float) or any
            # spacing still writes other bytes; keys out of order the full path reads
            # too, as the same state.
            or orjson.dumps(values) != values_text
        ):
            return None
        # Twelve members that all read: the object holds exactly ``LINE_VALUE_KEYS``.
        row = values if array else _in_order(values)
    except (orjson.JSONDecodeError, TypeError, KeyError):
        return None  # a member is missing: the full path says which
    (
        context,
        datamodel,
        queue,
        invocations,
        invoke_counter,
        macrostep,
        microstep,
        round_,
        send_counter,
        session_id,
        standard,
        timer_counter,
    ) = row
    limits = shape.limits
    if (
        standard is True
        and queue == _NOTHING
        and invocations == _NOTHING
        and type(datamodel) is dict
        and type(session_id) is str
        and 0 < len(session_id) <= MAX_ID_LENGTH
        and (limits is max_limits or max_limits is None)
        # ``fits``, its first case in one comparison (a short text vouches unread)
        and (len(values_text) <= shape.unread or fits(values_text, datamodel_cap(limits)))
    ):
        # The common position, checked in place: ``decode_values``' checks for a
        # position with no queue and no invocations, under the host's own budgets.
        if not _counters_fit(
            invoke_counter, send_counter, timer_counter, macrostep, microstep, round_
        ):
            return None
        # The standard system variables go back in; the stored datamodel held none of
        # them when it grew by three (one step, not three lookups before).
        stored = len(datamodel)
        # ``_standard_processors``' memo read in place (a lookup costs less than a call).
        datamodel["_ioprocessors"] = _STANDARD.get(session_id) or _standard_processors(session_id)
        datamodel["_name"] = machine.name
        datamodel["_sessionid"] = session_id
        if len(datamodel) != stored + 3:
            return None  # the full path refuses it and says why
        # ``build_state``, inlined: once per load.
        # A bare builder by calling the class (it has no ``__init__``): cheaper than
        # ``object.__new__``'s wrapper.
        state: Any = StateBuilder()
        state.machine = machine
        state.session_id = session_id
        state.configuration = shape.configuration
        state.internal_queue = ()
        state.history = dict(shape.history) if shape.history else {}
        state.entered = shape.entered
        state.states_to_invoke = shape.states_to_invoke
        state.invocations = {}
        state.invoke_counter = invoke_counter
        state.send_counter = send_counter
        state.timer_counter = timer_counter
        state.caller_context = context
        # Known per shape: no call of ``state_variables`` when it would hand the dict back.
        as_stored = shape.variables_as_stored
        state.datamodel = datamodel if as_stored else state_variables(machine, datamodel)
        # The chart's variables were read from this text: it bounds their size as ``fits``
        # bounded it (within the cap), so the next step measures none of them until its
        # writes bring that bound to the cap (``Run.admit``).
        state._datamodel_bound = (datamodel, TEXT_RATIO * len(values_text)) if as_stored else None
        state.running = shape.running
        state.status = shape.status
        state.macrostep = macrostep
        state.microstep = microstep
        state.round = round_
        state.trace = shape.trace
        state.max_macrostep_rounds = shape.rounds
        state.invoke_types = invoke_types
        state.routes = routes
        state.limits = limits
        state.__class__ = MachineState  # ``finish``, inlined
        loaded: MachineState = state
        return loaded
    members = dict(zip(VALUE_ORDER, row, strict=True))
    del members[STANDARD]
    if standard is True:
        if not _restore(members, machine):
            return None
    elif standard is not False:
        return None
    checked = decode_values(members, shape, machine, max_limits, values_text)
    return build_state(machine, shape, checked, members, invoke_types, routes)


_NOTHING: Final[list[Any]] = []
"""An empty list to compare with (never changed, never handed out): not one made each time."""


_VALUE_COUNT: Final = len(LINE_VALUE_KEYS)
_in_order: Final = operator.itemgetter(*VALUE_ORDER)
"""A format 3 values object's members in ``VALUE_ORDER`` (``KeyError`` when one lacks)."""


def _canonical_object(text: bytes, keys: frozenset[str]) -> dict[str, Any] | None:
    """The object ``text`` holds when it has exactly ``keys`` and orjson writes it back
    byte for byte; else None."""
    try:
        obj = orjson.loads(text)
        if type(obj) is not dict or len(obj) != len(keys) or obj.keys() != keys:
            return None
        if orjson.dumps(obj, option=_OPTIONS) != text:
            return None
    except (orjson.JSONDecodeError, TypeError):
        return None
    return obj


def _learn_shape(shape_text: bytes, machine: Machine) -> Shape | None:
    """Judge a shape line not seen before (and remember it), or None for the full path."""
    obj = _canonical_object(shape_text, SHAPE_KEYS)
    if obj is None:
        return None
    shape = decode_shape(obj, machine)
    # Loaded states share their index sets with the engine's (``_run.shared``).
    shape.configuration = shared(machine, shape.configuration)
    shape.entered = shared(machine, shape.entered)
    memo: dict[bytes, tuple[Shape, int]] = machine._cache.setdefault(_SHAPES, {})
    if len(memo) >= room(_SHAPES_LIMIT, len(shape_text)):
        memo.clear()
    # With the CRC-32 of the line and its newline (``read_unkeyed``).
    known = memo[shape_text] = (shape, zlib.crc32(b"\n", zlib.crc32(shape_text)))
    machine._cache[_LAST_SHAPE] = (shape_text + b"\n", known, shape_text)
    return shape


def _restore(values: dict[str, Any], machine: Machine) -> bool:
    """Put the standard system variables back into ``values``' datamodel; False when they
    cannot be (a datamodel that is not an object or already holds one of them, a session
    id that is not a string: the checks then say what is wrong)."""
    datamodel = values["datamodel"]
    session_id = values["session_id"]
    if type(datamodel) is not dict or type(session_id) is not str:
        return False
    for name in IMPLIED:
        if name in datamodel:
            return False
    datamodel["_ioprocessors"] = _standard_processors(session_id)
    datamodel["_name"] = machine.name
    datamodel["_sessionid"] = session_id
    return True


def _full_read(
    payload: bytes,
    machine: Machine,
    invoke_types: frozenset[str] | None,
    routes: Container[str] | None,
    max_limits: MacrostepLimits | None,
    *,
    array: bool = True,
) -> MachineState:
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptPosition(f"the payload is not valid UTF-8: {exc}") from None
    shape_text, newline, values_text = text.partition("\n")
    if not newline:
        corrupt("the payload has no values line")
    shape = _keyed(decode_json(shape_text, "shape line"), SHAPE_KEYS, "the shape line")
    found = decode_json(values_text, "values line")
    if array:
        found = _named(found)
    values = _keyed(found, LINE_VALUE_KEYS, "the values line")
    standard = values.pop(STANDARD)
    if type(standard) is not bool:
        corrupt(f"{STANDARD} is {type(standard).__name__}, not a boolean")
    if standard and not _restore(values, machine):
        datamodel = values["datamodel"]
        if type(datamodel) is dict and any(name in datamodel for name in IMPLIED):
            corrupt(f"the datamodel holds a system variable {STANDARD} leaves out")
    try:
        return decode_payload(
            {**shape, **values}, machine, invoke_types, routes, max_limits, values_text
        )
    except RecursionError:
        raise CorruptPosition("invalid payload: a value is nested too deeply") from None


def _named(row: Any) -> dict[str, Any]:
    """A format 4 values line's array as format 3's object, or ``CorruptPosition``."""
    if type(row) is not list:
        corrupt(f"the values line is a {type(row).__name__}, not an array")
    if len(row) != _VALUE_COUNT:
        corrupt(f"the values line holds {len(row)} values, not {_VALUE_COUNT}")
    return dict(zip(VALUE_ORDER, row, strict=True))


def _keyed(obj: Any, keys: frozenset[str], where: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        corrupt(f"{where} is not an object")
    if obj.keys() != keys:
        missing = sorted(keys - obj.keys())
        extra = sorted(obj.keys() - keys)
        corrupt(f"{where} keys: missing {missing}, unexpected {extra}")
    return obj
