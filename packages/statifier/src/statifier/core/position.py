"""Positions: a ``MachineState`` as tagged, versioned, identity-checked JSON bytes (ADR 0004).

``dumps(state)`` writes a blob a durable host can store anywhere; ``loads(blob, machine)``
turns it back into the equal ``MachineState``. Nothing is pickled or marshalled: loading a
blob from untrusted storage can only produce a state or raise a ``PositionError``.

Framing (format version 2). Four header lines, each ended by ``\\n``, then the payload::

    statifier-position                  magic tag
    2                                   format version, canonical decimal ASCII
    "sha256:...;name=..."               chart identity, as a JSON string literal (ASCII)
    sha256:<64 lowercase hex digits>    SHA-256 of the payload bytes, or, keyed:
    hmac-sha256:<64 hex digits>         HMAC-SHA256 under the host's key of the three
                                        lines above (newlines included) and the payload
    {"caller_context":null,...}         payload: compact JSON, sorted keys, ASCII only

The payload runs to the end of the blob (there is no trailing newline) and is valid UTF-8
(``ensure_ascii`` escapes every non-ASCII character, which also keeps lone surrogates
faithful). The identity line is a JSON string so that a chart name holding a newline
cannot break the framing.

The payload is one JSON object holding every ``MachineState`` field except ``machine``,
``routes`` and ``invoke_types`` (per-driver data the driver re-supplies to ``loads``):

* ``configuration``, ``entered``: ascending lists of state indexes;
* ``states_to_invoke``: list of state indexes, in the state's order;
* ``history``: ``[[history_state_index, [state_index, ...]], ...]`` ascending by key;
* ``invocations``: ``[[state_index, invoke_index, invoke_id], ...]`` ascending by key;
* ``internal_queue``: a list of objects with every ``Event`` field;
* ``datamodel``, ``caller_context``: JSON values as they are;
* ``limits``: the macrostep budgets (``statifier.budget``), an object of integers or nulls;
* the scalars (``session_id``, counters, ``running``, ``status``...) as they are.

``loads`` checks, in order and before it decodes the payload: the magic tag
(``NotAPosition``), the version (``UnsupportedVersion``; versions 1 and 2 are read), the
identity (``IdentityMismatch``: the machine's identity, or the identity of its very
source bytes that positions carried before canonical identities); then the digest, the
JSON, the payload's structure and its meaning (``CorruptPosition``): a legal
configuration, history records the algorithm could have made, invocations of active
states, counters and budgets in range, a bounded queue and datamodel. It never returns a
partly loaded state. ``dumps`` always writes version 2 under the canonical identity, so a
legacy position is upgraded by the first step that stores it again.

``export_position`` and ``import_position`` carry a position across chart revisions:
the same position keyed by state ids, read against another revision with renamed states
and changed variables (``statifier.core._export``).

The plain digest detects damage, not forgery: whoever can write the store can recompute
it. A host whose storage is not trusted passes a ``key`` to both ``dumps`` and ``loads``
(ADR 0004): a keyed position loads only under the same key.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import math
import operator
import re
from collections.abc import Callable, Container, Iterable
from itertools import pairwise
from json.encoder import encode_basestring_ascii
from typing import Any, Final, NoReturn, cast, get_args

from statifier.budget import DEFAULT_LIMITS, MAX_LIMIT, MacrostepLimits
from statifier.budget import FIELDS as LIMIT_FIELDS
from statifier.chart.model import Machine
from statifier.core._export import (
    EXPORT_FORMAT,
    ImportRefused,
    MissingVariables,
    NotQuiescent,
    UnknownInvocations,
    UnknownStates,
    export_position,
    import_position,
)
from statifier.core._legal import configuration_problem, history_problem
from statifier.core.events import MAX_NAME_LENGTH, Event, EventType
from statifier.core.state import MachineState, StateBuilder, Status, finish
from statifier.errors import PositionError
from statifier.values import MAX_DEPTH, MAX_INT_BITS, ValueRefused, brief, measure

__all__ = [
    "EXPORT_FORMAT",
    "FORMAT_VERSION",
    "MAGIC",
    "READABLE_VERSIONS",
    "CorruptPosition",
    "IdentityMismatch",
    "ImportRefused",
    "MissingVariables",
    "NotAPosition",
    "NotQuiescent",
    "PositionError",
    "UnknownInvocations",
    "UnknownStates",
    "UnserializablePosition",
    "UnsupportedVersion",
    "dumps",
    "export_position",
    "import_position",
    "loads",
]

FORMAT_VERSION: Final = 2
"""The format version ``dumps`` writes."""

READABLE_VERSIONS: Final = frozenset({1, FORMAT_VERSION})
"""The format versions ``loads`` reads: version 1 is version 2 without ``limits`` (and
without keyed digests); it loads with the host's ``max_limits`` as its budgets."""

MAGIC: Final = b"statifier-position\n"
"""The magic tag every position starts with (its first header line, newline included)."""

_DIGEST_PREFIX: Final = b"sha256:"
_KEYED_PREFIX: Final = b"hmac-sha256:"
_DIGEST_LINE: Final = re.compile(rb"(hmac-)?sha256:[0-9a-f]{64}")
_MIN_KEY_BYTES: Final = 16

MAX_COUNTER: Final = MAX_LIMIT
"""The largest counter a position may carry."""

MAX_ID_LENGTH: Final = MAX_NAME_LENGTH
"""The longest session id, invoke id or queued event name a position may carry."""

MAX_QUEUE: Final = 100_000
"""The longest internal queue a position may carry when its budget does not bound it."""
_VERSION_LINE: Final = re.compile(rb"0|[1-9][0-9]{0,17}")

_EVENT_TYPES: Final[frozenset[str]] = frozenset(get_args(EventType))
_STATUSES: Final = frozenset({"running", "done"})

_EVENT_KEYS: Final = frozenset(
    {"name", "type", "data", "sendid", "origin", "origintype", "invokeid", "caller_context"}
)
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


class NotAPosition(PositionError):
    """The blob is not a position at all: not bytes, or it lacks the magic tag."""


class UnsupportedVersion(PositionError):
    """The blob is a position in a format version this code does not read.

    ``version`` is the version found: an ``int``, or the raw header text when it is not a
    canonical decimal integer.
    """

    def __init__(self, version: int | str) -> None:
        self.version = version
        super().__init__(
            f"position format version {version!r} is not supported "
            f"(this code reads versions {', '.join(map(str, sorted(READABLE_VERSIONS)))})"
        )


class IdentityMismatch(PositionError):
    """The position was written for another chart (or another source of this chart).

    ``expected`` is the identity of the machine handed to ``loads``; ``found`` is the one
    the blob names.
    """

    def __init__(self, expected: str, found: str) -> None:
        self.expected = expected
        self.found = found
        super().__init__(f"position is for chart {found!r}, not for chart {expected!r}")


class CorruptPosition(PositionError):
    """The blob claims to be a position for this chart but is truncated, altered or invalid."""


class UnserializablePosition(PositionError):
    """``dumps`` cannot write the state: it holds a value JSON cannot carry faithfully."""


# -- dumps -------------------------------------------------------------------------------


def dumps(state: MachineState, *, key: bytes | None = None) -> bytes:
    """Serialize ``state`` into a position blob (see the module docstring for the framing).

    Equal states give equal bytes. With ``key`` (at least 16 bytes, the host's secret) the
    digest is an HMAC-SHA256 that only a holder of the key can recompute. Raises
    ``UnserializablePosition`` (and writes nothing) when the datamodel, ``caller_context``
    or a queued event holds a value that is not JSON-like (``str``, ``int``, ``float``,
    ``bool``, ``None``, ``list``, ``dict`` with ``str`` keys), a NaN or infinite float, or
    a cycle, or when the state is not one ``loads`` would accept.
    """
    _check_key(key)
    text = _plain_payload_text(state) or _checked_payload_text(state)
    body = text.encode("ascii")
    head = _head(state.machine.identity)
    return b"".join((head, _digest(head, body, key), b"\n", body))


def _checked_payload_text(state: MachineState) -> str:
    """The payload text of ``state`` after the checks ``loads`` runs on a payload, or
    ``UnserializablePosition`` saying what is wrong."""
    try:
        payload, datamodel_text = _encode_state(state)
        # Only valid payloads are written: whatever dumps writes, loads reads.
        _decode_parts(payload, state.machine, None, datamodel_text, json_typed=False)
        return _payload_text(payload, datamodel_text)
    except CorruptPosition as exc:
        # A value JSON would carry unfaithfully (a tuple, a non-string key): say where.
        _check_json(state.datamodel, "datamodel")
        raise UnserializablePosition(f"state is not a valid position: {exc}") from None
    except MemoryError:
        raise UnserializablePosition("state is too large to write") from None
    except (TypeError, ValueError, RecursionError) as exc:
        raise UnserializablePosition(f"state is not JSON-serializable: {brief(str(exc))}") from None


_ENCODER: Final = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
)
"""The payload's JSON form: compact, sorted keys, ASCII only, no NaN (what ``json.dumps``
with those options writes)."""


def _one_shot_encoder() -> Callable[[Any], str]:
    """``_ENCODER.encode`` without building a new C encoder per call; a cycle is found as
    a ``RecursionError`` instead of a ``ValueError`` (both mean: not JSON)."""
    try:
        from _json import make_encoder
    except ImportError:  # pragma: no cover - an interpreter without the C accelerator
        return _ENCODER.encode
    encoder = make_encoder(
        None, _ENCODER.default, encode_basestring_ascii, None, ":", ",", True, False, False
    )
    join = "".join
    return lambda value: join(encoder(value, 0))


_encode: Final = _one_shot_encoder()


def _payload_text(payload: dict[str, Any], datamodel_text: str) -> str:
    """``json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
    allow_nan=False)`` of a payload ``_decode_parts`` accepted (so of the types it checked),
    with the datamodel already encoded as ``datamodel_text``."""
    context = payload["caller_context"]
    history = payload["history"]
    queue = payload["internal_queue"]
    invocations = payload["invocations"]
    return _write_payload(
        "null" if context is None else _encode(context),
        payload["configuration"],
        datamodel_text,
        payload["entered"],
        _encode(history) if history else "[]",
        _encode(queue) if queue else "[]",
        _encode(invocations) if invocations else "[]",
        _limits_text(*payload["limits"].values()),
        payload,
    )


def _write_payload(
    context: str,
    configuration: list[int],
    datamodel: str,
    entered: list[int],
    history: str,
    queue: str,
    invocations: str,
    limits: str,
    plain: Any,
) -> str:
    """The payload's JSON text, members in sorted order: the JSON values already encoded,
    the lists of state indexes written out, and the plain members (exact ``int`` counters,
    ``bool`` flags, the ``str`` session id, the round budget) read from ``plain`` (the
    payload, or the state itself: they are named alike) by item or by attribute."""
    get = plain.__getitem__ if type(plain) is dict else plain.__getattribute__
    rounds = get("max_macrostep_rounds")
    running = get("running")
    return (
        f'{{"caller_context":{context}'
        f',"configuration":[{",".join(map(str, configuration))}]'
        f',"datamodel":{datamodel}'
        f',"entered":[{",".join(map(str, entered))}]'
        f',"history":{history}'
        f',"internal_queue":{queue}'
        f',"invocations":{invocations}'
        f',"invoke_counter":{get("invoke_counter")}'
        f',"limits":{limits}'
        f',"macrostep":{get("macrostep")}'
        f',"max_macrostep_rounds":{"null" if rounds is None else rounds}'
        f',"microstep":{get("microstep")}'
        f',"round":{get("round")}'
        f',"running":{"true" if running else "false"}'
        f',"send_counter":{get("send_counter")}'
        f',"session_id":{encode_basestring_ascii(get("session_id"))}'
        f',"states_to_invoke":[{",".join(map(str, get("states_to_invoke")))}]'
        f',"status":"{"running" if running else "done"}"'
        f',"timer_counter":{get("timer_counter")}'
        f',"trace":{"true" if get("trace") else "false"}}}'
    )


def _plain_payload_text(state: MachineState) -> str | None:
    """The payload text of ``state`` when it is plainly a valid position, the way the engine
    makes them: index sets as frozensets, no queued events, every field of the type and in
    the range ``loads`` wants, a legal configuration and history, a datamodel its encoded
    text vouches for (``_fits``). None when anything is in doubt: ``_checked_payload_text``
    then writes the same text or says what is wrong (tests check that it accepts whatever
    this accepts)."""
    try:
        return _plain_text(state)
    except (PositionError, TypeError, ValueError, RecursionError):
        return None


def _plain_text(state: MachineState) -> str | None:  # noqa: C901 - every field, in turn
    machine = state.machine
    count = len(machine.states)
    configuration = state.configuration
    entered = state.entered
    running = state.running
    status = state.status
    if (
        state.internal_queue
        or type(configuration) is not frozenset
        or type(entered) is not frozenset
        or type(status) is not str
        or not configuration <= entered
    ):
        return None
    active = sorted(configuration)
    visited = sorted(entered)
    if not (_plain_indexes(active, count) and _plain_indexes(visited, count)):
        return None
    if running is True and status == "running":
        if _legal_configuration(machine, active) is not None:
            return None
    elif running is not False or status != "done" or active:
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
        _decode_history(history, machine)
    invocations: Any = state.invocations
    if invocations:
        invocations = [[s, n, name] for (s, n), name in sorted(invocations.items())]
        _decode_invocations(invocations, machine.states, configuration)
    limits = _limit_values(state.limits)
    for value in limits:
        if value is not None and (type(value) is not int or not 0 < value <= MAX_LIMIT):
            return None
    rounds = state.max_macrostep_rounds
    if rounds is not None and (type(rounds) is not int or not 0 < rounds <= MAX_LIMIT):
        return None
    session_id = state.session_id
    if type(session_id) is not str or not 0 < len(session_id) <= MAX_ID_LENGTH:
        return None
    for counter in (
        state.invoke_counter,
        state.send_counter,
        state.timer_counter,
        state.macrostep,
        state.microstep,
        state.round,
    ):
        if type(counter) is not int or not 0 <= counter <= MAX_COUNTER:
            return None
    if type(state.trace) is not bool:
        return None
    datamodel = state.datamodel
    if type(datamodel) is not dict:
        return None
    datamodel_text = _encode(datamodel)
    cap = limits[_CAP_FIELD]
    if not (_fits(datamodel_text, MAX_LIMIT if cap is None else cap) and _json_typed(datamodel)):
        return None
    context = state.caller_context
    if context is not None:
        _check_json(context, "caller_context")
    return _write_payload(
        "null" if context is None else _encode(context),
        active,
        datamodel_text,
        visited,
        _encode(history) if history else "[]",
        "[]",
        _encode(invocations) if invocations else "[]",
        _limits_text(*limits),
        state,
    )


def _plain_indexes(indexes: list[Any], count: int) -> bool:
    """Whether the sorted ``indexes`` are exact ints, all state indexes of the chart."""
    for index in indexes:
        if type(index) is not int:
            return False
    return not indexes or (indexes[0] >= 0 and indexes[-1] < count)


_CAP_FIELD: Final = LIMIT_FIELDS.index("datamodel_bytes")


@functools.lru_cache(maxsize=64)
def _limits_text(*values: int | None) -> str:
    """The encoded ``limits`` member (the same few budgets in every position)."""
    return _ENCODER.encode(dict(zip(LIMIT_FIELDS, values, strict=True)))


@functools.lru_cache(maxsize=64)
def _head(identity: str) -> bytes:
    """The three header lines before the digest (newlines included)."""
    return b"".join(
        (MAGIC, str(FORMAT_VERSION).encode("ascii"), b"\n", _identity_line(identity), b"\n")
    )


def _check_key(key: bytes | None) -> None:
    if key is None:
        return
    if not isinstance(key, bytes):
        raise TypeError(f"a position key is bytes, not {type(key).__name__}")
    if len(key) < _MIN_KEY_BYTES:
        raise ValueError(f"a position key has at least {_MIN_KEY_BYTES} bytes")


def _digest(head: bytes, body: bytes, key: bytes | None) -> bytes:
    """The digest line (without its newline): plain SHA-256 of the body, or the keyed HMAC
    of the header lines and the body."""
    if key is None:
        return _DIGEST_PREFIX + hashlib.sha256(body).hexdigest().encode("ascii")
    mac = hmac.new(key, head, hashlib.sha256)
    mac.update(body)
    return _KEYED_PREFIX + mac.hexdigest().encode("ascii")


@functools.lru_cache(maxsize=64)
def _identity_line(identity: str) -> bytes:
    return json.dumps(identity, ensure_ascii=True).encode("ascii")


def _encode_state(state: MachineState) -> tuple[dict[str, Any], str]:
    """The payload of ``state`` as a dict, and its datamodel already encoded."""
    datamodel = state.datamodel
    try:
        # Cycles, NaN and unknown types make the encoder raise at C speed (what is left,
        # tuples and non-string keys, the datamodel check refuses); the walk below is only
        # there to say where the culprit is.
        datamodel_text = _encode(datamodel)
    except (TypeError, ValueError, RecursionError):
        _check_json(datamodel, "datamodel")
        raise
    if state.caller_context is not None:
        _check_json(state.caller_context, "caller_context")
    queue: list[dict[str, Any]] = []
    for position, event in enumerate(state.internal_queue):
        if not isinstance(event, Event):
            raise UnserializablePosition(
                f"internal_queue[{position}] is a {type(event).__name__}, not an Event"
            )
        where = f"internal_queue[{position}]"
        _check_json(event.data, f"{where}.data")
        _check_json(event.caller_context, f"{where}.caller_context")
        queue.append(
            {
                "name": event.name,
                "type": event.type,
                "data": event.data,
                "sendid": event.sendid,
                "origin": event.origin,
                "origintype": event.origintype,
                "invokeid": event.invokeid,
                "caller_context": event.caller_context,
            }
        )
    try:
        history = [[key, list(value)] for key, value in sorted(state.history.items())]
        invocations = [[s, i, invoke_id] for (s, i), invoke_id in sorted(state.invocations.items())]
        configuration = sorted(state.configuration)
        entered = sorted(state.entered)
    except (TypeError, ValueError) as exc:
        raise UnserializablePosition(f"state is not a valid position: {exc}") from None
    limits = state.limits
    payload = {
        "session_id": state.session_id,
        "configuration": configuration,
        "internal_queue": queue,
        "history": history,
        "entered": entered,
        "states_to_invoke": list(state.states_to_invoke),
        "invocations": invocations,
        "invoke_counter": state.invoke_counter,
        "send_counter": state.send_counter,
        "timer_counter": state.timer_counter,
        "caller_context": state.caller_context,
        "datamodel": datamodel,
        "running": state.running,
        "status": state.status,
        "macrostep": state.macrostep,
        "microstep": state.microstep,
        "round": state.round,
        "trace": state.trace,
        "max_macrostep_rounds": state.max_macrostep_rounds,
        "limits": dict(zip(LIMIT_FIELDS, _limit_values(limits), strict=True)),
    }
    return payload, datamodel_text


class _NotJson(Exception):
    """Raised by ``_walk``; ``path`` collects the segments leading to the bad value."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path: list[str] = []


def _check_json(value: Any, where: str) -> None:
    """Raise ``UnserializablePosition`` unless ``value`` round-trips through JSON unchanged."""
    try:
        _walk(value, set())
    except _NotJson as exc:
        path = where + "".join(reversed(exc.path))
        raise UnserializablePosition(f"{path}: {exc.reason}") from None
    except RecursionError:
        raise UnserializablePosition(f"{where}: value is nested too deeply") from None


def _walk(value: Any, on_path: set[int]) -> None:  # noqa: C901 - one branch per JSON kind
    if value is None or isinstance(value, bool | int | str):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _NotJson(f"{value!r} is not representable in JSON")
        return
    if isinstance(value, dict | list):
        key = id(value)
        if key in on_path:
            raise _NotJson("the value contains a cycle")
        on_path.add(key)
        if isinstance(value, dict):
            for name, child in value.items():
                if not isinstance(name, str):
                    raise _NotJson(
                        f"dict key {name!r} is a {type(name).__name__}; JSON keys are strings"
                    )
                try:
                    _walk(child, on_path)
                except _NotJson as exc:
                    exc.path.append(f"[{name!r}]")
                    raise
        else:
            for position, child in enumerate(value):
                try:
                    _walk(child, on_path)
                except _NotJson as exc:
                    exc.path.append(f"[{position}]")
                    raise
        on_path.discard(key)
        return
    if isinstance(value, tuple):
        raise _NotJson("a tuple does not survive JSON (it comes back as a list); use a list")
    raise _NotJson(f"a value of type {type(value).__name__} is not JSON-serializable")


# -- loads -------------------------------------------------------------------------------


def loads(
    blob: bytes | bytearray | memoryview,
    machine: Machine,
    *,
    invoke_types: Iterable[str] | None = None,
    routes: Container[str] | None = None,
    key: bytes | None = None,
    max_limits: MacrostepLimits = DEFAULT_LIMITS,
) -> MachineState:
    """Load a position written by ``dumps`` for ``machine``.

    ``invoke_types`` and ``routes`` are the driver's per-driver data (see
    ``statifier.initialize``); positions do not store them. ``invoke_types`` is frozen
    into a ``frozenset``; ``routes`` is kept as given. ``bytearray`` and
    ``memoryview`` blobs are accepted as well as ``bytes``.

    ``key`` is the host's secret when positions were written with one: a keyed loads
    accepts only positions keyed with it, a plain loads refuses keyed positions.
    ``max_limits`` is the most this host lets a position spend per macrostep: a stored
    budget above it (or unbounded where it is bounded) is refused, so a forged position
    cannot make the next event run without end.

    Raises, checking in this order: ``NotAPosition`` (not bytes, or no magic tag),
    ``UnsupportedVersion``, ``IdentityMismatch``, then ``CorruptPosition`` (truncated,
    digest mismatch, invalid UTF-8 or JSON, or a payload that does not describe a valid
    position of ``machine``).
    """
    _check_key(key)
    if isinstance(blob, bytearray | memoryview):
        blob = bytes(blob)
    if not isinstance(blob, bytes):
        raise NotAPosition(f"a position is bytes, not {type(blob).__name__}")
    version, body = _fast_body(blob, machine, key) or _body(blob, machine, key)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptPosition(f"the payload is not valid UTF-8: {exc}") from None
    try:
        payload, end = _SCAN(text, 0)
        if end != len(text):
            raise ValueError("extra data")
    except (StopIteration, ValueError, RecursionError):
        # Read again the slow way, which accepts surrounding whitespace and says what is wrong.
        try:
            payload = _DECODER.decode(text)
        except (ValueError, RecursionError) as exc:
            raise CorruptPosition(f"the payload is not valid JSON: {exc}") from None
    if version == 1:
        payload = _from_version_1(payload, max_limits)
    try:
        return decode_payload(payload, machine, _frozen(invoke_types), routes, max_limits, text)
    except RecursionError:
        raise CorruptPosition("invalid payload: a value is nested too deeply") from None


def _fast_body(blob: bytes, machine: Machine, key: bytes | None) -> tuple[int, bytes] | None:
    """``(2, payload bytes)`` when ``blob`` is a current position of ``machine`` whose
    digest (keyed with ``key`` if given) matches: the header lines ``dumps`` writes, byte for
    byte. None otherwise (``_body`` then checks the header line by line and says why)."""
    head = _head(machine.identity)
    prefix = _DIGEST_PREFIX if key is None else _KEYED_PREFIX
    end = len(head) + len(prefix) + 64
    if not (
        blob.startswith(head)
        and blob.startswith(prefix, len(head))
        and blob[end : end + 1] == b"\n"
    ):
        return None
    body = blob[end + 1 :]
    if not hmac.compare_digest(blob[len(head) : end], _digest(head, body, key)):
        return None
    return FORMAT_VERSION, body


def _body(blob: bytes, machine: Machine, key: bytes | None) -> tuple[int, bytes]:
    """The format version and the payload bytes of ``blob``, after its header checks, in
    the documented order (``NotAPosition``, ``UnsupportedVersion``, ``IdentityMismatch``,
    then ``CorruptPosition`` for the digest)."""
    if not blob.startswith(MAGIC):
        raise NotAPosition("the blob does not start with the statifier position tag")
    rest = blob[len(MAGIC) :]

    version_line, rest = _header_line(rest, "format version")
    if _VERSION_LINE.fullmatch(version_line) is None:
        raise UnsupportedVersion(version_line.decode("utf-8", "replace"))
    version = int(version_line)
    if version not in READABLE_VERSIONS:
        raise UnsupportedVersion(version)

    identity_line, rest = _header_line(rest, "chart identity")
    if not _names_machine(identity_line, machine):
        raise IdentityMismatch(machine.identity, _read_identity(identity_line))

    digest_line, body = _header_line(rest, "digest")
    if _DIGEST_LINE.fullmatch(digest_line) is None:
        raise CorruptPosition("the digest line is malformed")
    keyed = digest_line.startswith(_KEYED_PREFIX)
    if keyed and version == 1:
        raise CorruptPosition("a version 1 position has no keyed digest")
    if keyed and key is None:
        raise CorruptPosition("the position is keyed: loading it needs the host's key")
    if key is not None and not keyed:
        raise CorruptPosition("the position is not keyed, but a key was given")
    head = blob[: len(blob) - len(body) - len(digest_line) - 1]
    if not hmac.compare_digest(digest_line, _digest(head, body, key)):
        raise CorruptPosition("the payload does not match its digest (altered or truncated)")
    return version, body


def _from_version_1(payload: Any, max_limits: MacrostepLimits) -> Any:
    """A version 1 payload as version 2: version 1 stored no budgets (they did not exist
    yet), so the position gets the most this host allows."""
    if not isinstance(payload, dict):
        return payload  # refused as it is by the checks of the payload
    if "limits" in payload:
        _corrupt("a version 1 payload has no limits")
    return {**payload, "limits": {name: getattr(max_limits, name) for name in LIMIT_FIELDS}}


def _names_machine(identity_line: bytes, machine: Machine) -> bool:
    """Whether a position's identity line names ``machine``: its identity, or the identity
    positions were written under before canonical identities (the SHA-256 of the very
    source bytes this machine was compiled from, ADR 4)."""
    if hmac.compare_digest(identity_line, _identity_line(machine.identity)):
        return True
    legacy = machine.source_identity
    return bool(legacy) and hmac.compare_digest(identity_line, _identity_line(legacy))


def _header_line(data: bytes, what: str) -> tuple[bytes, bytes]:
    line, newline, rest = data.partition(b"\n")
    if not newline:
        raise CorruptPosition(f"the blob is truncated in its header ({what} line)")
    return line, rest


def _read_identity(line: bytes) -> str:
    try:
        found = json.loads(line.decode("ascii"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        found = None
    return found if isinstance(found, str) else line.decode("utf-8", "replace")


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {key!r}")
            seen.add(key)
    return result


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not allowed")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{brief(text, 40)} is not a finite number")
    return value


_DECODER: Final = json.JSONDecoder(
    object_pairs_hook=_unique_object, parse_constant=_no_constant, parse_float=_finite
)
"""Reads a payload: duplicate keys, NaN/Infinity and numbers too large for a float (which
would read as infinite) are errors."""

_SCAN: Final = cast(Callable[[str, int], tuple[Any, int]], vars(_DECODER)["scan_once"])
"""``_DECODER`` without its whitespace handling: the payload ``dumps`` writes has none."""


def _frozen(values: Iterable[str] | None) -> frozenset[str] | None:
    if values is None:
        return None
    if isinstance(values, str):
        raise TypeError("invoke_types must be an iterable of strings, not a single string")
    return frozenset(values)


def _corrupt(message: str) -> NoReturn:
    raise CorruptPosition(f"invalid payload: {message}")


def _keys(obj: Any, expected: frozenset[str], where: str) -> dict[str, Any]:
    if type(obj) is dict and len(obj) == len(expected) and obj.keys() <= expected:
        return obj
    if not isinstance(obj, dict):
        _corrupt(f"{where} is a {_kind(obj)}, not an object")
    keys = set(obj)
    if keys != expected:
        missing = sorted(expected - keys)
        extra = sorted(keys - expected)
        _corrupt(f"{where} keys: missing {missing}, unexpected {extra}")
    return obj


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _counter(obj: dict[str, Any], key: str) -> int:
    value = obj[key]
    if type(value) is not int:
        _corrupt(f"{key} is a {_kind(value)}, not an integer")
    if value < 0:
        _corrupt(f"{key} is negative ({value})")
    if value > MAX_COUNTER:
        _corrupt(f"{key} is larger than {MAX_COUNTER}")
    return value


def _flag(obj: dict[str, Any], key: str) -> bool:
    value = obj[key]
    if not isinstance(value, bool):
        _corrupt(f"{key} is a {_kind(value)}, not a boolean")
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        _corrupt(f"{where} is a {_kind(value)}, not a string")
    if len(value) > MAX_ID_LENGTH:
        _corrupt(f"{where} is longer than {MAX_ID_LENGTH} characters")
    return value


def _optional_text(value: Any, where: str) -> str | None:
    return None if value is None else _text(value, where)


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        _corrupt(f"{where} is a {_kind(value)}, not a list")
    return value


def _index(value: Any, count: int, where: str) -> int:
    if type(value) is not int:
        _corrupt(f"{where} is a {_kind(value)}, not a state index")
    if not 0 <= value < count:
        _corrupt(f"{where} = {value} is not a state index of this chart (0..{count - 1})")
    return value


def _ascending(values: list[Any], where: str) -> None:
    if any(a >= b for a, b in pairwise(values)):
        _corrupt(f"{where} is not strictly ascending")


def _indexes(value: Any, count: int, where: str) -> list[int]:
    items = _list(value, where)
    for i, item in enumerate(items):
        if type(item) is not int or not 0 <= item < count:
            _index(item, count, f"{where}[{i}]")
    return items


def _decode_event(obj: Any, where: str) -> Event:
    fields = _keys(obj, _EVENT_KEYS, where)
    kind = fields["type"]
    if not isinstance(kind, str) or kind not in _EVENT_TYPES:
        _corrupt(f"{where}.type is {kind!r}, not one of {sorted(_EVENT_TYPES)}")
    return Event(
        name=_text(fields["name"], f"{where}.name"),
        type=cast(EventType, kind),
        data=fields["data"],
        sendid=_optional_text(fields["sendid"], f"{where}.sendid"),
        origin=_optional_text(fields["origin"], f"{where}.origin"),
        origintype=_optional_text(fields["origintype"], f"{where}.origintype"),
        invokeid=_optional_text(fields["invokeid"], f"{where}.invokeid"),
        caller_context=fields["caller_context"],
    )


class _Parts:
    """A payload's fields, checked and converted (what ``_decode_parts`` returns)."""

    __slots__ = (
        "configuration",
        "entered",
        "history",
        "invocations",
        "limits",
        "queue",
        "rounds",
        "running",
        "states_to_invoke",
        "status",
    )

    configuration: frozenset[int]
    entered: frozenset[int]
    history: dict[int, tuple[int, ...]]
    invocations: dict[tuple[int, int], str]
    limits: MacrostepLimits
    queue: tuple[Event, ...]
    rounds: int | None
    running: bool
    states_to_invoke: tuple[int, ...]
    status: Status


def decode_payload(
    obj: Any,
    machine: Machine,
    invoke_types: frozenset[str] | None,
    routes: Container[str] | None,
    max_limits: MacrostepLimits | None,
    text: str | None = None,
) -> MachineState:
    """Build the state a payload describes, or raise ``CorruptPosition`` saying what is wrong.

    ``obj`` is a decoded payload of the current format (see the module docstring);
    ``max_limits`` is the ceiling on the stored budgets (None: no ceiling); ``text`` is
    the JSON text ``obj`` was decoded from, when it was (it spares measuring the datamodel
    value by value when the text is small enough to vouch for it, ``_fits``).
    Every position this module (and ``import_position``) makes passes through here.
    """
    parts = _decode_parts(obj, machine, max_limits, text)
    payload: dict[str, Any] = obj
    state: Any = object.__new__(StateBuilder)
    state.machine = machine
    state.session_id = payload["session_id"]
    state.configuration = parts.configuration
    state.internal_queue = parts.queue
    state.history = parts.history
    state.entered = parts.entered
    state.states_to_invoke = parts.states_to_invoke
    state.invocations = parts.invocations
    state.invoke_counter = payload["invoke_counter"]
    state.send_counter = payload["send_counter"]
    state.timer_counter = payload["timer_counter"]
    state.caller_context = payload["caller_context"]
    state.datamodel = payload["datamodel"]
    state.running = parts.running
    state.status = parts.status
    state.macrostep = payload["macrostep"]
    state.microstep = payload["microstep"]
    state.round = payload["round"]
    state.trace = payload["trace"]
    state.max_macrostep_rounds = parts.rounds
    state.invoke_types = invoke_types
    state.routes = routes
    state.limits = parts.limits
    state._datamodel_bound = None
    return finish(state)


def _decode_parts(  # noqa: C901 - every field of the payload, checked in turn
    obj: Any,
    machine: Machine,
    max_limits: MacrostepLimits | None,
    text: str | None = None,
    *,
    json_typed: bool = True,
) -> _Parts:
    """Check a payload against ``machine`` (shape and meaning) and convert its fields, or
    raise ``CorruptPosition`` saying what is wrong. The fields ``_Parts`` does not hold are
    checked and usable as they are.

    ``text``, when given, is JSON text that holds the datamodel written out (the payload
    it was decoded from, or the datamodel as ``dumps`` encoded it); ``json_typed`` says
    the datamodel was decoded from JSON (so it holds only JSON types)."""
    payload = _keys(obj, _PAYLOAD_KEYS, "the payload")
    parts = _Parts()
    states = machine.states
    count = len(states)

    status = payload["status"]
    if not isinstance(status, str) or status not in _STATUSES:
        _corrupt(f"status is {brief(status)}, not 'running' or 'done'")
    running = _flag(payload, "running")
    if running != (status == "running"):
        _corrupt(f"running is {running} but status is {status!r}")
    parts.running = running
    parts.status = "done" if status == "done" else "running"

    configuration = _ascending_indexes(payload["configuration"], count, "configuration")
    if running:
        _problem(_legal_configuration(machine, configuration), "configuration")
    elif configuration:
        _corrupt("a finished execution has active states")
    entered = _ascending_indexes(payload["entered"], count, "entered")
    active = parts.configuration = frozenset(configuration)
    parts.entered = frozenset(entered)
    if not active <= parts.entered:
        _corrupt("an active state is missing from entered")
    states_to_invoke = payload["states_to_invoke"]
    if states_to_invoke != []:
        _indexes(states_to_invoke, count, "states_to_invoke")
        if len(set(states_to_invoke)) != len(states_to_invoke):
            _corrupt("states_to_invoke lists a state twice")
        if running and not active.issuperset(states_to_invoke):
            _corrupt("states_to_invoke lists a state that is not active")
        parts.states_to_invoke = tuple(states_to_invoke)
    else:
        parts.states_to_invoke = ()

    history = payload["history"]
    parts.history = {} if history == [] else _decode_history(history, machine)
    invocations = payload["invocations"]
    parts.invocations = (
        {} if invocations == [] else _decode_invocations(invocations, states, active)
    )

    limits = parts.limits = _decode_limits(payload["limits"], max_limits)
    rounds = payload["max_macrostep_rounds"]
    if rounds is not None and (type(rounds) is not int or not 1 <= rounds <= MAX_LIMIT):
        _corrupt(
            f"max_macrostep_rounds is {brief(rounds)}, not an integer in 1..{MAX_LIMIT} or null"
        )
    parts.rounds = rounds

    events = payload["internal_queue"]
    if events == []:
        parts.queue = ()
    else:
        events = _list(events, "internal_queue")
        queue_limit = MAX_QUEUE if limits.internal_events is None else limits.internal_events
        if len(events) > queue_limit + _QUEUE_SLACK:
            _corrupt(f"the internal queue holds {len(events)} events (the limit is {queue_limit})")
        parts.queue = tuple(
            _decode_event(event, f"internal_queue[{i}]") for i, event in enumerate(events)
        )

    datamodel = payload["datamodel"]
    if not isinstance(datamodel, dict):
        _corrupt(f"datamodel is a {_kind(datamodel)}, not an object")
    if not (
        text is not None
        and _fits(text, MAX_LIMIT if limits.datamodel_bytes is None else limits.datamodel_bytes)
        and (json_typed or _json_typed(datamodel))
    ):
        # What the text cannot vouch for is measured value by value (and refused there).
        if not all(isinstance(name, str) for name in datamodel):
            _corrupt("datamodel has a non-string variable name")
        _check_datamodel(datamodel, limits)

    session_id = payload["session_id"]
    if (not isinstance(session_id, str) or not 0 < len(session_id) <= MAX_ID_LENGTH) and not _text(
        session_id, "session_id"
    ):
        _corrupt("session_id is empty")
    for name in _COUNTERS:
        value = payload[name]
        if type(value) is not int or not 0 <= value <= MAX_COUNTER:
            _counter(payload, name)
    _flag(payload, "trace")
    return parts


def _ascending_indexes(value: Any, count: int, where: str) -> list[int]:
    """``value``, a strictly ascending list of state indexes (or ``CorruptPosition``)."""
    items = _list(value, where)
    previous = -1
    for item in items:
        if type(item) is not int or not previous < item < count:
            _indexes(items, count, where)
            _ascending(items, where)
        previous = item
    return items


def _decode_history(obj: Any, machine: Machine) -> dict[int, tuple[int, ...]]:
    """The ``history`` member: ``[[history_state, [states...]], ...]``, ascending by key."""
    states = machine.states
    count = len(states)
    history: dict[int, tuple[int, ...]] = {}
    history_keys: list[int] = []
    for i, pair in enumerate(_list(obj, "history")):
        where = f"history[{i}]"
        if not isinstance(pair, list) or len(pair) != 2:
            _corrupt(f"{where} is not a [history_state, [states...]] pair")
        key = _index(pair[0], count, f"{where}[0]")
        if states[key].kind != "history":
            _corrupt(f"{where}[0] = {key} is not a history state")
        history_keys.append(key)
        recorded = tuple(_indexes(pair[1], count, f"{where}[1]"))
        _problem(_legal_history(machine, key, recorded), where)
        history[key] = recorded
    _ascending(history_keys, "history")
    return history


def _decode_invocations(
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
            _corrupt(f"{where} is not a [state, invoke_index, invoke_id] triple")
        s = _index(triple[0], count, f"{where}[0]")
        n = triple[1]
        if type(n) is not int or not 0 <= n < len(states[s].invokes):
            _corrupt(f"{where}[1] = {brief(n)} is not an invoke index of state {states[s].id!r}")
        if s not in active:
            _corrupt(f"{where}: state {states[s].id!r} is not active")
        invocation_keys.append((s, n))
        invoke_id = _text(triple[2], f"{where}[2]")
        if not invoke_id:
            _corrupt(f"{where}[2] is an empty invoke id")
        invocations[(s, n)] = invoke_id
    _ascending(invocation_keys, "invocations")
    if len(set(invocations.values())) != len(invocations):
        _corrupt("two live invocations share an invoke id")
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


def _legal_configuration(machine: Machine, configuration: list[int]) -> str | None:
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
    if len(memo) >= _CHECKS_LIMIT:
        memo.clear()
    memo[key] = problem


_QUEUE_SLACK: Final = 64
"""Events past the queue limit a position may hold: a call that exhausts its budget still
queues the error events of the blocks it aborts."""


def _problem(problem: str | None, where: str) -> None:
    if problem is not None:
        _corrupt(f"{where}: {problem}")


def _decode_limits(obj: Any, ceiling: MacrostepLimits | None) -> MacrostepLimits:
    if type(obj) is dict and len(obj) == len(LIMIT_FIELDS) and obj.keys() <= _LIMIT_KEYS:
        # The common case: budgets read before, within the ceiling.
        stored = _limit_items(obj)
        for value in stored:
            if value is not None and (type(value) is not int or not 0 < value <= MAX_LIMIT):
                break
        else:
            known = _LIMITS.get(stored)
            if known is not None and (
                ceiling is None or known is ceiling or _within(known, ceiling)
            ):
                return known
    fields = _keys(obj, _LIMIT_KEYS, "limits")
    values: dict[str, int | None] = {}
    for name in LIMIT_FIELDS:
        value = fields[name]
        if value is not None and (type(value) is not int or not 1 <= value <= MAX_LIMIT):
            _corrupt(f"limits.{name} is {brief(value)}, not an integer in 1..{MAX_LIMIT} or null")
        most = None if ceiling is None else getattr(ceiling, name)
        if most is not None and (value is None or value > most):
            _corrupt(
                f"limits.{name} is {'unbounded' if value is None else value}; "
                f"this host allows at most {most} (loads(max_limits=...))"
            )
        values[name] = value
    key = tuple(values.values())
    limits = _LIMITS.get(key)
    if limits is None:
        limits = MacrostepLimits(**values)
        if len(_LIMITS) >= _CHECKS_LIMIT:
            _LIMITS.clear()
        _LIMITS[key] = limits
    return limits


_LIMIT_KEYS: Final = frozenset(LIMIT_FIELDS)
_limit_items: Final = operator.itemgetter(*LIMIT_FIELDS)
_limit_values: Final = operator.attrgetter(*LIMIT_FIELDS)


def _within(limits: MacrostepLimits, ceiling: MacrostepLimits) -> bool:
    """Whether every budget of ``limits`` is bounded at most as ``ceiling`` bounds it."""
    return all(
        most is None or (value is not None and value <= most)
        for value, most in zip(_limit_values(limits), _limit_values(ceiling), strict=True)
    )


_LIMITS: dict[tuple[int | None, ...], MacrostepLimits] = {
    tuple(getattr(DEFAULT_LIMITS, name) for name in LIMIT_FIELDS): DEFAULT_LIMITS
}
"""Budgets read before, by value: positions share one ``MacrostepLimits`` per set of values
(the default one in the common case) instead of building one per load."""


_TEXT_RATIO: Final = 12
"""``measure`` counts at most this many bytes per character of a value's JSON text: a
string with a character past U+FFFF counts 12 per character (a float 24 for at least
3 characters, the rest less), keys and separators less than their own characters."""

_SHORT_DIGITS: Final = int(MAX_INT_BITS * math.log10(2))
"""Every integer written in at most this many digits has at most ``MAX_INT_BITS`` bits."""

_LONG_NUMBER: Final = re.compile(f"[0-9]{{{_SHORT_DIGITS + 1}}}")


def _fits(text: str, cap: int) -> bool:
    """Whether ``text``, JSON text holding a datamodel of JSON-typed values with no NaN or
    infinite float, vouches for every value ``_check_datamodel`` would accept: no deeper
    than ``MAX_DEPTH`` (it has no more brackets than that), no integer of more than
    ``MAX_INT_BITS`` bits (no run of digits long enough), and no more than ``cap`` bytes
    measured (``_TEXT_RATIO`` times the text's length). False is no verdict: the values
    are measured one by one then."""
    size = len(text)
    return (
        size * _TEXT_RATIO <= cap
        and text.count("[") + text.count("{") <= MAX_DEPTH
        and (size <= _SHORT_DIGITS or _LONG_NUMBER.search(text) is None)
    )


_SCALARS: Final[frozenset[type]] = frozenset({str, int, float, bool, type(None)})


def _json_typed(value: Any) -> bool:
    """Whether ``value`` holds only ``str``, ``int``, ``float``, ``bool``, ``None``,
    ``list`` and ``dict`` with ``str`` keys (exactly those types, as ``measure`` wants).
    It recurses: ``value`` is no deeper than ``MAX_DEPTH`` (``_fits`` said so first)."""
    kind = type(value)
    children: Iterable[Any]
    if kind is dict:
        for name in value:
            if type(name) is not str:
                return False
        children = value.values()
    elif kind is list:
        children = value
    else:
        return kind in _SCALARS
    for child in children:
        kind = type(child)
        if kind in _SCALARS:
            continue
        if (kind is not dict and kind is not list) or not _json_typed(child):
            return False
    return True


def _check_datamodel(datamodel: dict[str, Any], limits: MacrostepLimits) -> None:
    """Every value storable; the chart's variables within the datamodel cap."""
    cap = MAX_LIMIT if limits.datamodel_bytes is None else limits.datamodel_bytes
    total = 0
    for name, value in datamodel.items():
        system = name.startswith("_")
        try:
            size, _ = measure(value, MAX_LIMIT if system else max(cap - total, 0))
        except ValueRefused as exc:
            _corrupt(f"datamodel[{brief(name)}]: {exc}")
        if not system:
            total += size
