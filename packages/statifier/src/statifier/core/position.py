"""Positions: a ``MachineState`` as tagged, versioned, identity-checked JSON bytes (ADR 0004).

``dumps(state)`` writes a blob a durable host can store anywhere; ``loads(blob, machine)``
turns it back into the equal ``MachineState``. Nothing is pickled or marshalled: loading a
blob from untrusted storage can only produce a state or raise a ``PositionError``.

Framing (format version 4). Four header lines, each ended by ``\\n``, then the payload::

    statifier-position                  magic tag
    4                                   format version, canonical decimal ASCII
    "scxml-c1:sha256:...;name=..."      chart identity, as a JSON string literal (ASCII)
    crc32:<8 lowercase hex digits>      CRC-32 of the payload bytes (``zlib.crc32``), or,
    hmac-sha256:<64 hex digits>         keyed: HMAC-SHA256 under the host's key of the three
                                        lines above (newlines included) and the payload
    {"configuration":[2],...}           the shape line, compact JSON with sorted keys
    [null,{"_event":...},[],[],0,...]   the values line: an array of twelve values in a
                                        fixed order (``_format3.VALUE_ORDER``)

The payload runs to the end of the blob (there is no trailing newline) and is valid UTF-8.
The identity line is a JSON string so that a chart name holding a newline cannot break
the framing.

The payload holds every ``MachineState`` field except ``machine``, ``routes`` and
``invoke_types`` (per-driver data the driver re-supplies to ``loads``):

* ``configuration``, ``entered``: ascending lists of state indexes;
* ``states_to_invoke``: list of state indexes, in the state's order;
* ``history``: ``[[history_state_index, [state_index, ...]], ...]`` ascending by key;
* ``invocations``: ``[[state_index, invoke_index, invoke_id], ...]`` ascending by key;
* ``internal_queue``: a list of objects with every ``Event`` field;
* ``datamodel``, ``caller_context``: JSON values as they are;
* ``limits``: the macrostep budgets (``statifier.budget``), an object of integers or nulls;
* the scalars (``session_id``, counters, ``running``, ``status``...) as they are.

Format 4 puts the members that place the execution in its chart on the shape line and
the rest on the values line, and leaves out the standard system variables
(``statifier.core._format3`` says how). Format 3, which ``loads`` still reads, is the
same with a values line that is an object with sorted keys and a plain digest that is
``sha256:<64 hex digits>``; format 2 is one JSON object of every member, ASCII only (and
the same SHA-256).

``loads`` checks, in order and before it decodes the payload: the magic tag
(``NotAPosition``), the version (``UnsupportedVersion``; versions 1 to 4 are read), the
identity (``IdentityMismatch``: the machine's identity, or the identity of its very
source bytes that positions carried before canonical identities); then the digest, the
JSON, the payload's structure and its meaning (``CorruptPosition``): a legal
configuration, history records the algorithm could have made, invocations of active
states, counters and budgets in range, a bounded queue and datamodel. It never returns a
partly loaded state. ``dumps`` always writes version 4 under the canonical identity, so a
legacy position is upgraded by the first step that stores it again.

``export_position`` and ``import_position`` carry a position across chart revisions:
the same position keyed by state ids, read against another revision with renamed states
and changed variables (``statifier.core._export``).

Both directions take a plain path first and fall back to the full one, which alone says
what is wrong (ADR 19): ``dumps`` writes a state the engine made straight from its fields,
checked in place (``_format3.plain_parts``), and ``loads`` reads the header ``dumps``
writes in one comparison, a shape line it judged before by its bytes, and the values line
with orjson (``_format3.read_unkeyed``). The CRC-32 of a shape line is remembered with
it: both compute an unkeyed digest over the values line alone, continuing that CRC.
Neither measures the datamodel value by value when its JSON text vouches for it
(``fits``: few enough brackets, digits and characters for any value in it to pass).
Property tests check that each plain path accepts nothing the full checks refuse and
writes the same bytes. A number that reads as an infinite float (``1e999``) is not valid
in a payload.

The plain digest detects damage, not forgery: whoever can write the store can recompute
it, so format 4 takes the cheaper check of damage (CRC-32) where formats 1 to 3 took a
SHA-256, which vouched for nothing more. A host whose storage is not trusted passes a
``key`` to both ``dumps`` and ``loads`` (ADR 0004): a keyed position loads only under the
same key.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import math
import re
import zlib
from binascii import hexlify
from collections.abc import Container, Iterable
from typing import Any, Final

from statifier.budget import DEFAULT_LIMITS, MacrostepLimits
from statifier.budget import FIELDS as LIMIT_FIELDS
from statifier.chart.model import Machine
from statifier.core import _format3
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
from statifier.core._json import SCAN, decode_json, encode_json
from statifier.core._payload import (
    MAX_COUNTER,
    MAX_ID_LENGTH,
    MAX_QUEUE,
    CorruptPosition,
    corrupt,
    decode_event,
    decode_parts,
    decode_payload,
    limit_values,
)
from statifier.core.events import Event
from statifier.core.state import MachineState
from statifier.datamodel.base import stored_variables
from statifier.errors import PositionError
from statifier.values import brief

__all__ = [
    "EXPORT_FORMAT",
    "FORMAT_VERSION",
    "MAGIC",
    "MAX_COUNTER",
    "MAX_ID_LENGTH",
    "MAX_QUEUE",
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
    "event_from_payload",
    "event_payload",
    "export_position",
    "import_position",
    "loads",
]

FORMAT_VERSION: Final = 4
"""The format version ``dumps`` writes."""

READABLE_VERSIONS: Final = frozenset({1, 2, 3, FORMAT_VERSION})
"""The format versions ``loads`` reads: versions 4 and 3 are two lines (a shape and the
values, an array in 4, an object in 3); version 2 is one JSON object; version 1 is version
2 without ``limits`` (and without keyed digests) and loads with the host's ``max_limits``
as its budgets."""

MAGIC: Final = b"statifier-position\n"
"""The magic tag every position starts with (its first header line, newline included)."""

_DIGEST_PREFIX: Final = b"sha256:"
"""The plain digest of formats 1 to 3: SHA-256 of the payload."""
_CHECK_PREFIX: Final = b"crc32:"
"""The plain digest of format 4: CRC-32 of the payload (``zlib.crc32``), 8 hex digits."""
_KEYED_PREFIX: Final = b"hmac-sha256:"
_DIGEST_LINE: Final = re.compile(rb"(hmac-)?sha256:[0-9a-f]{64}")
_DIGEST_LINE_4: Final = re.compile(rb"crc32:[0-9a-f]{8}|hmac-sha256:[0-9a-f]{64}")
_MIN_KEY_BYTES: Final = 16

_VERSION_LINE: Final = re.compile(rb"0|[1-9][0-9]{0,17}")


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
    if key is None:
        # ``_digest``'s, inlined, for the payload's parts: the shape line's CRC comes with
        # it, and the payload's is that one continued over the values line.
        parts = _format3.plain_parts(state)
        try:
            head = state.machine._cache[_PLAIN_HEAD]  # a subscript costs less than ``get``
        except KeyError:
            head = _learn_head(state.machine)
        if parts is None:
            body = _checked_body(state)
            check = hexlify(zlib.crc32(body).to_bytes(4))
            return b"".join((head, check, b"\n", body))
        shape_line, shape_check, values_line = parts
        check = hexlify(zlib.crc32(values_line, shape_check).to_bytes(4))
        return b"".join((head, check, b"\n", shape_line, values_line))
    _check_key(key)
    body = _format3.plain_body(state) or _checked_body(state)
    head = _head(state.machine.identity)
    return b"".join((head, _digest(head, body, key), b"\n", body))


def _checked_body(state: MachineState) -> bytes:
    """The payload of ``state`` after the checks ``loads`` runs on a payload, or
    ``UnserializablePosition`` saying what is wrong."""
    try:
        payload, datamodel_text = _encode_state(state)
        # Only valid payloads are written: whatever dumps writes, loads reads.
        decode_parts(payload, state.machine, None, datamodel_text, from_json=False)
        return _format3.body(payload, state.machine)
    except CorruptPosition as exc:
        # A value JSON would carry unfaithfully (a tuple, a non-string key): say where.
        _check_json(stored_variables(state.datamodel), "datamodel")
        raise UnserializablePosition(f"state is not a valid position: {exc}") from None
    except MemoryError:
        raise UnserializablePosition("state is too large to write") from None
    except (TypeError, ValueError, RecursionError) as exc:
        raise UnserializablePosition(f"state is not JSON-serializable: {brief(str(exc))}") from None


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


def _digest(head: bytes, body: bytes, key: bytes | None, version: int = FORMAT_VERSION) -> bytes:
    """The digest line (without its newline) of a position in format ``version``: the
    keyed HMAC of the header lines and the body, or, plain, the CRC-32 of the body (format
    4) or its SHA-256 (formats 1 to 3)."""
    if key is None:
        if version >= 4:
            # The 8 lowercase hex digits of the big-endian CRC (``b"%08x" %`` writes the
            # same, in three times the time).
            return _CHECK_PREFIX + hexlify(zlib.crc32(body).to_bytes(4))
        return _DIGEST_PREFIX + hashlib.sha256(body).hexdigest().encode("ascii")
    mac = hmac.new(key, head, hashlib.sha256)
    mac.update(body)
    return _KEYED_PREFIX + mac.hexdigest().encode("ascii")


@functools.lru_cache(maxsize=64)
def _identity_line(identity: str) -> bytes:
    return json.dumps(identity, ensure_ascii=True).encode("ascii")


def _encode_state(state: MachineState) -> tuple[dict[str, Any], str]:
    """The payload of ``state`` as a dict, and its datamodel already encoded."""
    datamodel = stored_variables(state.datamodel)
    try:
        # Cycles, NaN and unknown types make the encoder raise at C speed (what is left,
        # tuples and non-string keys, the datamodel check refuses); the walk below is only
        # there to say where the culprit is.
        datamodel_text = encode_json(datamodel)
    except (TypeError, ValueError, RecursionError):
        _check_json(datamodel, "datamodel")
        raise
    if state.caller_context is not None:
        _check_json(state.caller_context, "caller_context")
    queue = [
        event_payload(event, f"internal_queue[{position}]")
        for position, event in enumerate(state.internal_queue)
    ]
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
        "limits": dict(zip(LIMIT_FIELDS, limit_values(limits), strict=True)),
    }
    return payload, datamodel_text


def event_payload(event: Event, where: str = "event") -> dict[str, Any]:
    """The JSON object a position stores for a queued ``event``: every field, by name
    (``raw`` only when the event has one).

    Hosts that store events of their own (a durable execution's messages to another)
    store this too, and read it back with :func:`event_from_payload`. Raises
    ``UnserializablePosition`` (naming ``where``) when a field JSON cannot carry faithfully.
    """
    if not isinstance(event, Event):
        raise UnserializablePosition(f"{where} is a {type(event).__name__}, not an Event")
    _check_json(event.data, f"{where}.data")
    _check_json(event.caller_context, f"{where}.caller_context")
    payload = {
        "name": event.name,
        "type": event.type,
        "data": event.data,
        "sendid": event.sendid,
        "origin": event.origin,
        "origintype": event.origintype,
        "invokeid": event.invokeid,
        "caller_context": event.caller_context,
    }
    if event.raw is not None:
        payload["raw"] = event.raw  # only then: the stored form of other events is unchanged
    return payload


def event_from_payload(payload: Any, where: str = "event") -> Event:
    """The ``Event`` an :func:`event_payload` object describes; ``CorruptPosition`` (naming
    ``where``) when it is not one. Its values are taken as they are: bound their size
    where the payload is read (``statifier.values.parse_json``, ``measure``)."""
    return decode_event(payload, where)


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
    if key is not None:
        _check_key(key)
    if type(blob) is not bytes:
        if isinstance(blob, bytearray | memoryview):
            blob = bytes(blob)
        elif not isinstance(blob, bytes):
            raise NotAPosition(f"a position is bytes, not {type(blob).__name__}")
    types = None if invoke_types is None else _frozen(invoke_types)
    if key is None:
        # ``_fast_body``'s work for an unkeyed position: the header ``dumps`` writes,
        # byte for byte, with the digest of what follows it, in one comparison. A blob
        # with another header pays a CRC for nothing before the checks line by line say why.
        try:
            head = machine._cache[_PLAIN_HEAD]  # a subscript costs less than ``get``
        except KeyError:
            head = _learn_head(machine)
        state = _format3.read_unkeyed(blob, head, machine, types, routes, max_limits)
        if state is not None:
            return state
    else:
        keyed = _fast_body(blob, machine, key)
        if keyed is not None:
            return _format3.read(keyed, machine, types, routes, max_limits)
    version, body = _body(blob, machine, key)
    if version >= 3:
        return _format3.read(body, machine, types, routes, max_limits, version)
    return _read_object(body, version, machine, types, routes, max_limits)


def _read_object(
    body: bytes,
    version: int,
    machine: Machine,
    types: frozenset[str] | None,
    routes: Container[str] | None,
    max_limits: MacrostepLimits,
) -> MachineState:
    """The state of a format 1 or 2 payload (one JSON object), or ``CorruptPosition``."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptPosition(f"the payload is not valid UTF-8: {exc}") from None
    try:
        payload, end = SCAN(text, 0)
        if end != len(text):
            raise ValueError("extra data")
    except (StopIteration, ValueError, RecursionError):
        # Read again the slow way, which accepts surrounding whitespace and says what is wrong.
        payload = decode_json(text, "payload")
    if version == 1:
        payload = _from_version_1(payload, max_limits)
    try:
        return decode_payload(payload, machine, types, routes, max_limits, text)
    except RecursionError:
        raise CorruptPosition("invalid payload: a value is nested too deeply") from None


def _fast_body(blob: bytes, machine: Machine, key: bytes) -> bytes | None:
    """The payload bytes of ``blob`` when it is a current position of ``machine`` whose
    digest, keyed with ``key``, matches: the header lines ``dumps`` writes, byte for byte.
    None otherwise (``_body`` then checks the header line by line and says why). ``loads``
    reads an unkeyed position's header the same way (``_format3.read_unkeyed``)."""
    head = _head(machine.identity)
    end = len(head) + len(_KEYED_PREFIX) + _HEX_DIGITS
    if not (blob.startswith(head) and blob.startswith(_KEYED_PREFIX, len(head))):
        return None
    if blob[end : end + 1] != b"\n":
        return None
    body = blob[end + 1 :]
    if not hmac.compare_digest(blob[len(head) : end], _digest(head, body, key)):
        return None
    return body


_HEX_DIGITS: Final = 64
"""The hex digits of a SHA-256 digest line (a CRC-32's: ``_format3._CHECK_DIGITS``)."""


@functools.lru_cache(maxsize=64)
def _plain_head(identity: str) -> bytes:
    """The header lines of an unkeyed position up to its digest's hex digits."""
    return _head(identity) + _CHECK_PREFIX


_PLAIN_HEAD: Final = "position head"
"""The key, in a machine's ``_cache``, of ``_plain_head`` of its identity: both ways read it
there (one dict lookup instead of reading the identity and calling the cache)."""


def _learn_head(machine: Machine) -> bytes:
    """``_plain_head`` of ``machine``'s identity, remembered in its ``_cache``."""
    head: bytes = _plain_head(machine.identity)
    machine._cache[_PLAIN_HEAD] = head
    return head


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
    if (_DIGEST_LINE_4 if version >= 4 else _DIGEST_LINE).fullmatch(digest_line) is None:
        raise CorruptPosition("the digest line is malformed")
    keyed = digest_line.startswith(_KEYED_PREFIX)
    if keyed and version == 1:
        raise CorruptPosition("a version 1 position has no keyed digest")
    if keyed and key is None:
        raise CorruptPosition("the position is keyed: loading it needs the host's key")
    if key is not None and not keyed:
        raise CorruptPosition("the position is not keyed, but a key was given")
    head = blob[: len(blob) - len(body) - len(digest_line) - 1]
    if not hmac.compare_digest(digest_line, _digest(head, body, key, version)):
        raise CorruptPosition("the payload does not match its digest (altered or truncated)")
    return version, body


def _from_version_1(payload: Any, max_limits: MacrostepLimits) -> Any:
    """A version 1 payload as version 2: version 1 stored no budgets (they did not exist
    yet), so the position gets the most this host allows."""
    if not isinstance(payload, dict):
        return payload  # refused as it is by the checks of the payload
    if "limits" in payload:
        corrupt("a version 1 payload has no limits")
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


def _frozen(values: Iterable[str] | None) -> frozenset[str] | None:
    if values is None:
        return None
    if isinstance(values, str):
        raise TypeError("invoke_types must be an iterable of strings, not a single string")
    return frozenset(values)
