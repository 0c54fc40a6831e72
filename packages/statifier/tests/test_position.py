"""``statifier.core.position``: positions round-trip exactly and bad blobs fail loudly and typed."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import zlib
from collections.abc import Callable
from typing import Any

import orjson
import pytest
import statifier
from statifier import Event, Machine, MachineState, external, handle_event, initialize
from statifier.core import _format3
from statifier.core._format3 import VALUE_ORDER
from statifier.core.position import (
    FORMAT_VERSION,
    MAGIC,
    CorruptPosition,
    IdentityMismatch,
    NotAPosition,
    UnserializablePosition,
    UnsupportedVersion,
    dumps,
    event_from_payload,
    event_payload,
    loads,
)
from statifier.errors import PositionError

from engine_support import blobs

CHART = """\
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" initial="work">
  <datamodel>
    <data id="n" expr="0"/>
    <data id="x" expr="0.1"/>
    <data id="big" expr="2 ** 100"/>
    <data id="doc"
          expr="{'name': 'caf\u00e9 \u2603', 'items': [1, 2.5, None, True, {'deep': [[]]}]}"/>
    <data id="seen" expr="None"/>
  </datamodel>
  <parallel id="work">
    <state id="left">
      <history id="left_h" type="deep"><transition target="l1"/></history>
      <state id="l1">
        <state id="l1a"><transition event="go" target="l1b"/></state>
        <state id="l1b"/>
      </state>
      <state id="l2"><transition event="back" target="left_h"/></state>
      <transition event="jump" target="l2">
        <assign location="x" expr="x + 0.2"/>
        <assign location="seen" expr="_event.data"/>
      </transition>
    </state>
    <state id="right">
      <invoke type="worker" id="w1"/>
      <invoke type="worker"/>
      <onentry><send event="tick" delay="5s" id="timer"/><send event="tock" delay="1s"/></onentry>
      <state id="r1">
        <transition event="go" target="r2">
          <cancel sendid="timer"/><log label="go" expr="n"/>
        </transition>
      </state>
      <state id="r2">
        <transition cond="n &lt; 3" target="r2"><assign location="n" expr="n + 1"/></transition>
        <transition event="finish" target="done"/>
      </state>
    </state>
  </parallel>
  <final id="done"/>
</scxml>
"""

OTHER_CHART = """\
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0"><state id="only"/></scxml>
"""

RAISING_CHART = """\
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0">
  <state id="s">
    <onentry><raise event="e1"/><raise event="e2"/><raise event="e3"/><raise event="e4"/></onentry>
    <transition event="e1" target="t"/>
  </state>
  <state id="t"><transition event="e4" target="u"/></state>
  <state id="u"/>
</scxml>
"""

WORKER = frozenset({"worker"})
CONTEXT = {"request": "r-1", "attempt": 2, "weights": [0.1, 1e-300], "who": "\u00f6\u2603"}


@pytest.fixture(scope="module")
def machine() -> Machine:
    return statifier.compile(CHART)


def _start(machine: Machine, **kwargs: Any) -> MachineState:
    state, _ = initialize(machine, session_id="sess_position", invoke_types=WORKER, **kwargs)
    return state


def _events() -> list[Event]:
    """go (l1b, r2), jump (re-enters the parallel: history recorded), back (history), go."""
    return [
        external("go", caller_context={"step": 1}),
        external("jump", data={"float": 0.1, "big": 10**30, "text": "\u00e9\U0001f600"}),
        external("back", caller_context=CONTEXT),
        external("go", caller_context=CONTEXT),
    ]


def _drive(machine: Machine) -> MachineState:
    """A state after a few events: history recorded, timers cancelled, values changed."""
    state = _start(machine)
    for event in _events():
        state, _ = handle_event(state, event)
    return state


_split = blobs.split
_reframe = blobs.reframe
_payload = blobs.payload


def _typed(value: Any) -> Any:
    """A structure that tells ``1`` from ``1.0`` and ``True`` and a list from a tuple."""
    if isinstance(value, dict):
        return ("dict", sorted((k, _typed(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return (type(value).__name__, [_typed(v) for v in value])
    return (type(value).__name__, repr(value))


def _assert_round_trip(state: MachineState, **kwargs: Any) -> MachineState:
    blob = dumps(state)
    loaded = loads(blob, state.machine, invoke_types=state.invoke_types, **kwargs)
    assert loaded == state
    assert _typed(loaded.datamodel) == _typed(state.datamodel)
    assert _typed(loaded.caller_context) == _typed(state.caller_context)
    assert dumps(loaded) == blob
    return loaded


# -- round trips -------------------------------------------------------------------------


def test_round_trip_after_initialize(machine: Machine) -> None:
    state = _start(machine)
    assert state.invocations  # the invokes in ``right`` are live
    assert state.is_active("l1a")
    assert state.is_active("r1")
    _assert_round_trip(state)


def test_round_trip_after_events(machine: Machine) -> None:
    state = _start(machine)
    for event in _events():
        state, _ = handle_event(state, event)
        _assert_round_trip(state)
    # The deep history recorded the atomic state ``l1b`` and took us back there.
    assert state.history == {machine.state_ids["left_h"]: (machine.state_ids["l1b"],)}
    assert state.is_active("l1b")
    assert state.is_active("r2")
    assert state.caller_context == CONTEXT
    assert state.datamodel["seen"]["big"] == 10**30
    assert state.datamodel["n"] == 3  # the guarded eventless self-transition ran out
    assert state.send_counter > 0
    assert state.timer_counter > 0
    assert state.invoke_counter > 0


def test_continuing_from_a_loaded_state_is_identical(machine: Machine) -> None:
    state = _drive(machine)
    loaded = loads(dumps(state), machine, invoke_types=WORKER)
    event = external("finish", caller_context={"last": True})
    direct, direct_effects = handle_event(state, event)
    again, again_effects = handle_event(loaded, event)
    assert again_effects == direct_effects
    assert again == direct
    assert direct.status == "done"
    assert not direct.running
    _assert_round_trip(direct)


def test_datamodel_values_round_trip_with_their_exact_types(machine: Machine) -> None:
    values: dict[str, Any] = {
        "point_one": 0.1,
        "third": 1 / 3,
        "tiny": 5e-324,
        "huge": 1.7976931348623157e308,
        "negative_zero": -0.0,
        "float_one": 1.0,
        "big_int": 2**200,
        "negative_big": -(10**40),
        "flags": [True, False, None, 0, 1],
        "unicode": 'caf\u00e9 \u2603 \U0001f600 \u0000 \u2028 "quoted" \\ \n',
        "lone_surrogate": "\ud800",
        "nested": {"a": {"b": [{"c": []}, {}]}, "": "empty key", "\u00e9": 1},
    }
    state = dataclasses.replace(_start(machine), datamodel={**_start(machine).datamodel, **values})
    loaded = _assert_round_trip(state)
    assert repr(loaded.datamodel["negative_zero"]) == "-0.0"
    assert loaded.datamodel["third"] == 1 / 3
    assert type(loaded.datamodel["float_one"]) is float


def test_queued_internal_events_round_trip() -> None:
    machine = statifier.compile(RAISING_CHART)
    state, produced = initialize(machine, session_id="sess_q", max_macrostep_rounds=2)
    assert any(isinstance(effect, statifier.core.effects.BudgetExhausted) for effect in produced)
    assert [event.name for event in state.internal_queue] == ["e3", "e4"]
    loaded = _assert_round_trip(state)
    assert loaded.internal_queue == state.internal_queue
    # Both copies go on to process the queued events the same way.
    direct = handle_event(state, "nothing")
    again = handle_event(loaded, "nothing")
    assert again == direct
    assert direct[0].is_active("u")


def test_every_event_field_and_caller_context_round_trip(machine: Machine) -> None:
    queued = (
        Event(
            name="done.invoke.w1",
            type="platform",
            data={"result": [1.5, "\u00e9"], "n": None},
            sendid="send_7",
            origin="#_w1",
            origintype="http://www.w3.org/TR/scxml/#SCXMLEventProcessor",
            invokeid="w1",
            caller_context={"trace": ["a", 1, 0.5], "nested": {"ok": True}},
        ),
        Event(name="plain"),
        Event(name="error.execution", type="internal", data="text", caller_context=[None]),
    )
    state = dataclasses.replace(
        _drive(machine), internal_queue=queued, caller_context={"host": CONTEXT}
    )
    loaded = _assert_round_trip(state)
    assert loaded.internal_queue == queued
    assert [dataclasses.asdict(e) for e in loaded.internal_queue] == [
        dataclasses.asdict(e) for e in queued
    ]


def test_finished_execution_round_trips() -> None:
    machine = statifier.compile(
        '<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0"><final id="f"/></scxml>'
    )
    state, _ = initialize(machine, session_id="sess_done", max_macrostep_rounds=None, trace=True)
    assert state.status == "done"
    assert not state.running
    loaded = _assert_round_trip(state)
    assert loaded.max_macrostep_rounds is None
    assert loaded.trace


def test_per_driver_data_is_not_stored_but_resupplied(machine: Machine) -> None:
    routes = frozenset({"#_parent", "#_scxml_other"})
    state = dataclasses.replace(_drive(machine), routes=routes)
    blob = dumps(state)
    assert b"worker" not in blob
    assert b"#_scxml_other" not in blob
    assert loads(blob, machine, invoke_types=WORKER, routes=routes) == state
    bare = loads(blob, machine)
    assert bare.invoke_types is None
    assert bare.routes is None
    assert bare != state
    assert dataclasses.replace(bare, invoke_types=WORKER, routes=routes) == state


def test_payload_holds_every_state_field_but_the_per_driver_ones(machine: Machine) -> None:
    payload = _payload(dumps(_drive(machine)))
    # Derived data a state carries between calls (``init=False``) is not stored.
    fields = {field.name for field in dataclasses.fields(MachineState) if field.init}
    assert set(payload) == fields - {"machine", "routes", "invoke_types"} | {blobs.STANDARD}


def test_blob_is_tagged_versioned_and_readable_json(machine: Machine) -> None:
    state = _drive(machine)
    blob = dumps(state)
    assert blob.startswith(MAGIC)
    assert MAGIC == b"statifier-position\n"
    header, payload = _split(blob)
    assert header[0] == b"statifier-position"
    assert header[1] == str(FORMAT_VERSION).encode() == b"4"
    assert json.loads(header[2]) == machine.identity
    assert header[3] == b"crc32:%08x" % zlib.crc32(payload)
    shape_line, values_line = payload.split(b"\n")
    shape = json.loads(shape_line)
    row = json.loads(values_line.decode("utf-8"))
    # The values line is an array in a fixed order: format 3's members, by sorted name.
    assert isinstance(row, list)
    assert VALUE_ORDER == (
        "caller_context",
        "datamodel",
        "internal_queue",
        "invocations",
        "invoke_counter",
        "macrostep",
        "microstep",
        "round",
        "send_counter",
        "session_id",
        "standard_system_variables",
        "timer_counter",
    )
    values = dict(zip(VALUE_ORDER, row, strict=True))
    assert set(shape) == {
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
    assert shape["configuration"] == sorted(state.configuration)
    assert shape["history"] == [[machine.state_ids["left_h"], [machine.state_ids["l1b"]]]]
    assert [tuple(t) for t in values["invocations"]] == sorted(
        (s, i, invoke_id) for (s, i), invoke_id in state.invocations.items()
    )
    assert values["datamodel"]["big"] == 2**100
    assert values["caller_context"] == CONTEXT
    # The standard system variables are left out, and said to be.
    assert values[blobs.STANDARD] is True
    assert not {"_ioprocessors", "_name", "_sessionid"} & set(values["datamodel"])
    assert "_event" in values["datamodel"]
    # Compact and canonical: equal states give equal bytes. orjson writes the shape; the
    # values hold an integer past 64 bits, so the standard library writes them (ASCII).
    assert shape_line == orjson.dumps(shape, option=orjson.OPT_SORT_KEYS)
    assert values_line == json.dumps(row, sort_keys=True, separators=(",", ":")).encode()
    assert dumps(_drive(machine)) == blob


def test_values_orjson_can_write_are_written_by_orjson(machine: Machine) -> None:
    state = _start(machine)
    state = dataclasses.replace(
        state, datamodel={**state.datamodel, "big": 2**63, "doc": "caf\u00e9", "x": 1e-05}
    )
    values_line = _split(dumps(state))[1].split(b"\n")[1]
    assert values_line == orjson.dumps(orjson.loads(values_line), option=orjson.OPT_SORT_KEYS)
    assert "caf\u00e9".encode() in values_line  # UTF-8, not escaped
    assert b'"x":0.00001' in values_line  # orjson's float text, not Python's 1e-05
    _assert_round_trip(state)


def test_system_variables_that_are_not_the_standard_ones_are_stored(machine: Machine) -> None:
    state = _start(machine)
    for changed in (
        {"_name": "renamed"},
        {"_sessionid": "other"},
        {"_ioprocessors": {"scxml": {"location": "#_scxml_sess_position"}}},
    ):
        odd = dataclasses.replace(state, datamodel={**state.datamodel, **changed})
        values = _payload(dumps(odd))
        assert values[blobs.STANDARD] is False
        assert {"_ioprocessors", "_name", "_sessionid"} <= set(values["datamodel"])
        _assert_round_trip(odd)
    bare = {k: v for k, v in state.datamodel.items() if k != "_name"}
    _assert_round_trip(dataclasses.replace(state, datamodel=bare))
    unnamed = statifier.compile(OTHER_CHART)
    assert unnamed.name is None
    plain, _ = initialize(unnamed, session_id="s")
    assert _payload(dumps(plain))[blobs.STANDARD] is True
    _assert_round_trip(plain)


@pytest.mark.parametrize("name", ["_ioprocessors", "_name", "_sessionid"])
def test_a_system_variable_both_left_out_and_stored_is_refused(machine: Machine, name: str) -> None:
    blob = dumps(_start(machine))
    payload = _payload(blob)
    payload["datamodel"][name] = "x"
    with pytest.raises(CorruptPosition, match="system variable"):
        loads(_reframe(blob, blobs.body(payload)), machine, invoke_types=WORKER)


@pytest.mark.parametrize("value", [1, None, "true"])
def test_the_standard_flag_is_a_boolean(machine: Machine, value: Any) -> None:
    blob = dumps(_start(machine))
    payload = _payload(blob)
    payload[blobs.STANDARD] = value
    with pytest.raises(CorruptPosition, match="standard_system_variables"):
        loads(_reframe(blob, blobs.body(payload)), machine, invoke_types=WORKER)


@pytest.mark.parametrize(
    "body",
    [
        b"{}",
        b'{"configuration":[]}\n',
        b"[]\n[]",
        b"\n",
    ],
)
def test_a_format_3_payload_needs_both_lines_as_objects(machine: Machine, body: bytes) -> None:
    blob = dumps(_start(machine))
    with pytest.raises(CorruptPosition):
        loads(_reframe(blob, body), machine, invoke_types=WORKER)


def test_format_2_positions_still_load(machine: Machine) -> None:
    state = _drive(machine)
    blob = dumps(state)
    legacy = blobs.format_2(_payload(blob), machine)
    old = _reframe(blob, blobs.body(legacy, version=2), version=2)
    assert loads(old, machine, invoke_types=WORKER) == state
    assert dumps(loads(old, machine, invoke_types=WORKER)) == blob


# -- refusing foreign blobs --------------------------------------------------------------


def test_loading_into_another_chart_raises_identity_mismatch(machine: Machine) -> None:
    blob = dumps(_drive(machine))
    other = statifier.compile(OTHER_CHART)
    with pytest.raises(IdentityMismatch) as caught:
        loads(blob, other)
    assert caught.value.expected == other.identity
    assert caught.value.found == machine.identity
    renamed = statifier.compile(CHART, name="orders\nv2", version="2")
    with pytest.raises(IdentityMismatch) as caught:
        loads(blob, renamed)
    assert caught.value.found == machine.identity
    # A name with a newline cannot break the framing.
    state, _ = initialize(renamed, session_id="s", invoke_types=WORKER)
    assert loads(dumps(state), renamed, invoke_types=WORKER) == state


@pytest.mark.parametrize(
    ("line", "version"),
    [(b"5", 5), (b"0", 0), (b"99999", 99999), (b"one", "one"), (b"03", "03")],
)
def test_other_versions_raise_unsupported_version(
    machine: Machine, line: bytes, version: int | str
) -> None:
    header, payload = _split(dumps(_start(machine)))
    blob = b"\n".join([header[0], line, *header[2:], payload])
    with pytest.raises(UnsupportedVersion) as caught:
        loads(blob, machine)
    assert caught.value.version == version


def test_checks_run_in_order_before_the_payload_is_read(machine: Machine) -> None:
    blob = dumps(_start(machine))
    header, _ = _split(blob)
    other = statifier.compile(OTHER_CHART)
    garbage = b"\xff not json at all"
    future = b"\n".join([header[0], b"5", *header[2:], garbage])
    with pytest.raises(UnsupportedVersion):
        loads(future, other)
    mangled = b"\n".join([*header, garbage])
    with pytest.raises(IdentityMismatch):
        loads(mangled, other)
    with pytest.raises(CorruptPosition, match="digest"):
        loads(mangled, machine)


@pytest.mark.parametrize(
    "blob",
    [
        b"",
        b"\x00",
        random.Random(4).randbytes(300),  # noqa: S311 - seeded noise, not a secret
        b'{"configuration": []}',
        MAGIC[:-1],
        b"STATIFIER-POSITION\n1\n",
        b"\n" + MAGIC,
    ],
)
def test_non_positions_raise_not_a_position(machine: Machine, blob: bytes) -> None:
    with pytest.raises(NotAPosition):
        loads(blob, machine)


@pytest.mark.parametrize("value", ["text", None, 42, ["list"]])
def test_non_bytes_raise_not_a_position(machine: Machine, value: Any) -> None:
    with pytest.raises(NotAPosition):
        loads(value, machine)


def test_str_of_a_real_blob_is_not_a_position(machine: Machine) -> None:
    blob = dumps(_start(machine))
    with pytest.raises(NotAPosition):
        loads(blob.decode("ascii"), machine)  # type: ignore[arg-type]


def test_bytearray_and_memoryview_are_accepted(machine: Machine) -> None:
    state = _drive(machine)
    blob = dumps(state)
    assert loads(bytearray(blob), machine, invoke_types=WORKER) == state
    assert loads(memoryview(blob), machine, invoke_types=WORKER) == state


# -- damaged blobs -----------------------------------------------------------------------


def test_every_truncation_raises_a_position_error(machine: Machine) -> None:
    blob = dumps(_drive(machine))
    for length in range(1, len(blob)):
        with pytest.raises(PositionError) as caught:
            loads(blob[:length], machine, invoke_types=WORKER)
        expected = NotAPosition if length < len(MAGIC) else CorruptPosition
        assert type(caught.value) is expected, length


def _region_error(blob: bytes, index: int) -> type[PositionError]:
    """The error a flipped byte at ``index`` must cause, by the header line it falls in."""
    ends = []
    start = 0
    for _ in range(4):
        start = blob.index(b"\n", start) + 1
        ends.append(start)
    if index < ends[0]:
        return NotAPosition
    if index < ends[1]:
        return UnsupportedVersion
    if index < ends[2]:
        return IdentityMismatch
    return CorruptPosition  # the digest line or the JSON payload


def test_every_flipped_byte_is_detected(machine: Machine) -> None:
    blob = dumps(_drive(machine))
    payload_start = len(blob) - len(_split(blob)[1])
    positions: list[int] = list(range(len(blob)))
    if len(blob) > 4000:  # keep it quick: the whole header and ~400 spread positions
        positions = sorted({*range(payload_start), *range(0, len(blob), len(blob) // 400)})
    checked = 0
    for index in positions:
        for mask in (0x01, 0x20, 0x80, 0xFF):
            damaged = bytearray(blob)
            damaged[index] ^= mask
            with pytest.raises(PositionError) as caught:
                loads(bytes(damaged), machine, invoke_types=WORKER)
            expected = _region_error(blob, index)
            if expected is UnsupportedVersion and _split(bytes(damaged))[0][1] in (b"2", b"3"):
                # The line names an older format, which is read: its payload is refused.
                expected = CorruptPosition
            assert type(caught.value) is expected, (index, mask)
            if index >= payload_start:
                assert "digest" in str(caught.value)
            checked += 1
    assert checked >= 4 * 400


def _mutated(
    blob: bytes, mutate: Callable[[dict[str, Any]], None], machine: Machine, version: int
) -> bytes:
    payload = _payload(blob)
    if version == 2:
        payload = blobs.format_2(payload, machine)
    mutate(payload)
    return _reframe(blob, blobs.body(payload, version), version=version)


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda payload: payload.__setitem__(key, value)


def _queue_event(**changes: Any) -> Callable[[dict[str, Any]], None]:
    event = {
        "name": "e",
        "type": "internal",
        "data": None,
        "sendid": None,
        "origin": None,
        "origintype": None,
        "invokeid": None,
        "caller_context": None,
    }
    event.update(changes)
    for key in [k for k, v in changes.items() if v is _MISSING]:
        del event[key]
    return _set("internal_queue", [event])


_MISSING = object()

MUTATIONS: dict[str, Callable[[dict[str, Any]], None]] = {
    "missing key": lambda p: p.pop("round"),
    "extra key": _set("routes", ["#_parent"]),
    "config out of range": _set("configuration", [1, 999]),
    "config negative": _set("configuration", [-1, 1]),
    "config not int": _set("configuration", ["1"]),
    "config bool": _set("configuration", [True]),
    "config unsorted": _set("configuration", [3, 2]),
    "config duplicate": _set("configuration", [2, 2]),
    "config not list": _set("configuration", {"1": 1}),
    "entered out of range": _set("entered", [10_000]),
    "states_to_invoke out of range": _set("states_to_invoke", [-5]),
    "history key not history": _set("history", [[1, [2]]]),
    "history bad pair": _set("history", [[3]]),
    "history not list": _set("history", {"3": [4]}),
    "history value out of range": _set("history", [[3, [400]]]),
    "history duplicate key": _set("history", [[3, [5]], [3, [6]]]),
    "invocation bad invoke index": _set("invocations", [[8, 7, "w1"]]),
    "invocation bad state": _set("invocations", [[1, 0, "w1"]]),
    "invocation id not str": _set("invocations", [[8, 0, 5]]),
    "invocation bad shape": _set("invocations", [[8, 0]]),
    "negative counter": _set("macrostep", -1),
    "float counter": _set("send_counter", 1.5),
    "bool counter": _set("invoke_counter", True),
    "null counter": _set("timer_counter", None),
    "bad status": _set("status", "paused"),
    "unhashable status": _set("status", ["running"]),
    "running not bool": _set("running", "yes"),
    "trace not bool": _set("trace", 1),
    "zero budget": _set("max_macrostep_rounds", 0),
    "string budget": _set("max_macrostep_rounds", "10"),
    "session id not str": _set("session_id", 7),
    "datamodel not object": _set("datamodel", []),
    "queue not list": _set("internal_queue", {}),
    "event not object": _set("internal_queue", ["e"]),
    "event missing field": _queue_event(origin=_MISSING),
    "event extra field": _queue_event(extra=1),
    "event bad type": _queue_event(type="bogus"),
    "event unhashable type": _queue_event(type=[]),
    "event name not str": _queue_event(name=None),
    "event sendid not str": _queue_event(sendid=3),
}


@pytest.mark.parametrize("version", [2, 3, 4])
@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_structurally_invalid_payloads_raise_corrupt_position(
    machine: Machine, mutation: str, version: int
) -> None:
    blob = dumps(_drive(machine))
    assert machine.states[3].kind == "history"
    assert len(machine.states[8].invokes) == 2
    damaged = _mutated(blob, MUTATIONS[mutation], machine, version)
    with pytest.raises(CorruptPosition, match="invalid payload"):
        loads(damaged, machine, invoke_types=WORKER)


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\xff\xfe{}",
        b"{not json",
        b"[]",
        b"null",
        b'"text"',
        b'{"a":1,"a":2}',
        b'{"round":NaN}',
        b'{"round":-Infinity}',
        b"[" * 100_000 + b"]" * 100_000,
        b'{"round":' + b"9" * 5000 + b"}",
    ],
)
def test_undecodable_payloads_with_a_valid_digest_raise_corrupt_position(
    machine: Machine, payload: bytes
) -> None:
    blob = _reframe(dumps(_start(machine)), payload)
    with pytest.raises(CorruptPosition):
        loads(blob, machine)


def test_duplicate_keys_inside_the_payload_are_refused(machine: Machine) -> None:
    blob = dumps(_start(machine))
    payload = blobs.body(_payload(blob), 3)
    doubled = payload[:-1] + b',"round":0}'
    with pytest.raises(CorruptPosition, match="duplicate key 'round'"):
        loads(_reframe(blob, doubled, version=3), machine, invoke_types=WORKER)


@pytest.mark.parametrize("version", [3, 4])
def test_duplicate_keys_inside_the_datamodel_are_refused(machine: Machine, version: int) -> None:
    blob = dumps(_start(machine))
    members = _payload(blob)
    members["datamodel"] = {**members["datamodel"], "dup": 1}
    payload = blobs.body(members, version)
    assert payload.count(b'"dup":1') == 1
    doubled = payload.replace(b'"dup":1', b'"dup":1,"dup":2')
    with pytest.raises(CorruptPosition, match="duplicate key 'dup'"):
        loads(_reframe(blob, doubled, version=version), machine, invoke_types=WORKER)
    # orjson alone keeps the last of the two: the plain read steps aside.
    shape_line, values_line = doubled.split(b"\n")
    assert orjson.loads(values_line)
    array = version == 4
    plain = _format3._plain_read(shape_line, values_line, machine, WORKER, None, None, array)
    assert plain is None


@pytest.mark.parametrize(
    "digest_line",
    [
        b"sha256:",
        b"sha256:" + b"A" * 64,
        b"md5:" + b"0" * 64,
        b"0" * 71,
        b"crc32:",
        b"crc32:" + b"A" * 8,
        b"crc32:" + b"0" * 9,
        b"crc32:" + b"0" * 64,
    ],
)
def test_malformed_digest_line_raises_corrupt_position(
    machine: Machine, digest_line: bytes
) -> None:
    header, payload = _split(dumps(_start(machine)))
    with pytest.raises(CorruptPosition, match="digest line is malformed"):
        loads(b"\n".join([*header[:3], digest_line, payload]), machine)


def test_uppercase_digest_is_not_accepted(machine: Machine) -> None:
    header, payload = _split(dumps(_start(machine)))
    upper = b"crc32:" + header[3][len(b"crc32:") :].upper()
    assert upper != header[3]
    with pytest.raises(CorruptPosition):
        loads(b"\n".join([*header[:3], upper, payload]), machine)


def test_each_format_has_its_own_plain_digest(machine: Machine) -> None:
    """Format 4 is checked by CRC-32, formats 1 to 3 by SHA-256: neither is taken for the
    other, even when it matches its payload."""
    blob = dumps(_start(machine))
    header, payload = _split(blob)
    sha = b"sha256:" + hashlib.sha256(payload).hexdigest().encode()
    with pytest.raises(CorruptPosition, match="digest line is malformed"):
        loads(b"\n".join([*header[:3], sha, payload]), machine)
    old = blobs.body(_payload(blob), 3)
    crc = b"crc32:%08x" % zlib.crc32(old)
    with pytest.raises(CorruptPosition, match="digest line is malformed"):
        loads(b"\n".join([header[0], b"3", header[2], crc, old]), machine)
    # Each under its own digest loads, to the same state.
    format_3 = b"\n".join(
        [header[0], b"3", header[2], b"sha256:" + hashlib.sha256(old).hexdigest().encode(), old]
    )
    assert loads(format_3, machine) == loads(blob, machine)


# -- states that cannot be written -------------------------------------------------------


class _Opaque:
    pass


@pytest.mark.parametrize(
    "context",
    [_Opaque(), {1, 2}, ("a", "tuple"), {1: "int key"}, {"k": [b"bytes"]}, float("nan")],
)
def test_unserializable_caller_context_raises(machine: Machine, context: Any) -> None:
    state = _drive(machine)
    with pytest.raises(UnserializablePosition, match="caller_context"):
        dumps(dataclasses.replace(state, caller_context=context))
    queued = (Event(name="e", caller_context={"inner": context}),)
    with pytest.raises(UnserializablePosition, match=r"internal_queue\[0\]\.caller_context"):
        dumps(dataclasses.replace(state, internal_queue=queued))


def test_unserializable_event_data_raises(machine: Machine) -> None:
    queued = (Event(name="ok"), Event(name="e", data={"when": _Opaque()}))
    with pytest.raises(UnserializablePosition, match=r"internal_queue\[1\]\.data\['when'\]"):
        dumps(dataclasses.replace(_drive(machine), internal_queue=queued))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_nan_and_infinity_in_the_datamodel_raise(machine: Machine, bad: float) -> None:
    state = _drive(machine)
    top = dataclasses.replace(state, datamodel={**state.datamodel, "bad": bad})
    with pytest.raises(UnserializablePosition, match=r"datamodel\['bad'\]"):
        dumps(top)
    nested = dataclasses.replace(state, datamodel={**state.datamodel, "v": {"l": [1, bad]}})
    with pytest.raises(UnserializablePosition, match=r"datamodel\['v'\]\['l'\]\[1\]"):
        dumps(nested)


@pytest.mark.parametrize("bad", [(1, 2), {1: "x"}], ids=["tuple", "int key"])
def test_values_json_would_change_raise_with_their_place(machine: Machine, bad: Any) -> None:
    state = _drive(machine)
    nested = dataclasses.replace(state, datamodel={**state.datamodel, "v": {"l": [1, bad]}})
    with pytest.raises(UnserializablePosition, match=r"datamodel\['v'\]\['l'\]\[1\]"):
        dumps(nested)


def test_nan_from_the_chart_itself_raises(machine: Machine) -> None:
    state, _ = initialize(machine, session_id="s", datamodel={"seed": float("nan")})
    with pytest.raises(UnserializablePosition):
        dumps(state)


def test_cyclic_and_too_deep_values_raise(machine: Machine) -> None:
    state = _drive(machine)
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(UnserializablePosition, match="cycle"):
        dumps(dataclasses.replace(state, datamodel={**state.datamodel, "c": cycle}))
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(UnserializablePosition):
        dumps(dataclasses.replace(state, datamodel={**state.datamodel, "d": deep}))


def test_shared_values_are_not_mistaken_for_cycles(machine: Machine) -> None:
    state = _drive(machine)
    shared = {"k": [1, 2]}
    value = {"a": shared, "b": [shared, shared]}
    _assert_round_trip(dataclasses.replace(state, datamodel={**state.datamodel, "s": value}))


def test_a_state_that_is_not_a_valid_position_is_not_written(machine: Machine) -> None:
    state = _drive(machine)
    with pytest.raises(UnserializablePosition, match="not a state index"):
        dumps(dataclasses.replace(state, configuration=frozenset({1, 500})))
    with pytest.raises(UnserializablePosition, match="negative"):
        dumps(dataclasses.replace(state, send_counter=-1))


def test_errors_are_position_errors() -> None:
    for error in (
        NotAPosition,
        UnsupportedVersion,
        IdentityMismatch,
        CorruptPosition,
        UnserializablePosition,
    ):
        assert issubclass(error, PositionError)
        assert issubclass(error, statifier.StatifierError)


def test_an_event_payload_round_trips_every_field_and_refuses_what_json_cannot_carry() -> None:
    event = Event(
        name="hello",
        type="internal",
        data={"x": [1, 2.5, None, "é"]},
        sendid="s1",
        origin="#_scxml_a",
        origintype="scxml",
        invokeid="kid",
        caller_context={"trace": "T"},
    )
    payload = event_payload(event)
    assert event_from_payload(json.loads(json.dumps(payload))) == event
    assert event_from_payload(event_payload(Event(name="bare"))) == Event(name="bare")
    with pytest.raises(UnserializablePosition, match=r"message\.data"):
        event_payload(Event(name="e", data=(1, 2)), "message")
    with pytest.raises(CorruptPosition, match=r"message\.type"):
        event_from_payload({**payload, "type": "bogus"}, "message")
    with pytest.raises(CorruptPosition):
        event_from_payload({"name": "e"}, "message")
