"""The fast paths of ``dumps`` and ``loads`` (issues 12 and 25) accept nothing the full
checks refuse.

``dumps`` writes the payload of a state the engine made straight from its fields (the
shape line remembered per machine) and no longer measures the datamodel value by value
when its encoded text vouches for it; ``loads`` reads the header ``dumps`` writes in one
comparison, a shape line it judged before by its bytes, the values line with orjson
(which must write it back byte for byte), and vouches for the datamodel from the line's
text. Each fast path either gives the answer of the full check or steps aside for it:
these properties check the "vouches for" parts and the plain paths against the full
checks, and the crafted positions check that what steps aside still refuses.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import zlib
from typing import Any, Final

import orjson
import pytest
import statifier
from hypothesis import given, settings
from hypothesis import strategies as st
from statifier import Machine, MachineState
from statifier.budget import DEFAULT_LIMITS, MAX_LIMIT, MacrostepLimits
from statifier.core import _format3, position
from statifier.core import _payload as payloads
from statifier.core._json import DECODER, encode_json
from statifier.core.position import CorruptPosition, UnserializablePosition, dumps, loads
from statifier.values import MAX_INT_BITS, measure, one_shot_json_writer

from engine_support import blobs

CHART = """\
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python"
       initial="a">
  <datamodel><data id="n" expr="0"/></datamodel>
  <state id="a"><transition event="go" target="b"><assign location="n" expr="n + 1"/>
    </transition></state>
  <state id="b"><transition event="go" target="a"/></state>
</scxml>
"""

_TEXT = st.text(
    st.characters(codec="utf-8") | st.sampled_from(["\U0001f600", "\u2603", "\x00", '"', "\\"]),
    max_size=12,
)
_SCALAR = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(-(2**80), 2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT
)
_JSON = st.recursive(
    _SCALAR,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_TEXT, inner, max_size=5),
    max_leaves=25,
)
_ODD = st.recursive(
    _SCALAR | st.tuples(st.integers()) | st.sampled_from([b"x", 1j, frozenset()]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(_TEXT | st.integers() | st.none(), inner, max_size=4)
        | st.tuples(inner)
    ),
    max_leaves=12,
)


@pytest.fixture(scope="module")
def machine() -> Machine:
    return statifier.compile(CHART)


def _state(machine: Machine, **kwargs: Any) -> MachineState:
    state, _ = statifier.initialize(machine, session_id="sess_fast", **kwargs)
    state, _ = statifier.handle_event(state, "go")
    return state


_ORJSON = orjson.OPT_SORT_KEYS
_reframe = blobs.reframe
_payload = blobs.payload


def _orjson(value: Any) -> bytes | None:
    """What orjson writes for ``value``, or None where it cannot."""
    try:
        return orjson.dumps(value, option=_ORJSON)
    except TypeError:
        return None


# -- the datamodel, vouched for by its text -----------------------------------------------


@settings(max_examples=400, deadline=None)
@given(value=_JSON)
def test_measure_never_counts_more_than_the_ratio_times_any_json_text(value: Any) -> None:
    size, _ = measure(value, 2**62)
    texts: list[str | bytes] = [
        encode_json(value),
        json.dumps(value, ensure_ascii=False, separators=(",", ":")),
    ]
    written = _orjson(value)
    if written is not None:
        texts.append(written)  # bytes: at least one per character
    for text in texts:
        assert size <= payloads.TEXT_RATIO * len(text)


@settings(max_examples=300, deadline=None)
@given(value=_JSON, sort_keys=st.booleans(), ensure_ascii=st.booleans())
def test_the_one_shot_writer_writes_what_json_dumps_writes(
    value: Any, sort_keys: bool, ensure_ascii: bool
) -> None:
    write = one_shot_json_writer(sort_keys=sort_keys, ensure_ascii=ensure_ascii)
    assert write(value) == json.dumps(
        value, sort_keys=sort_keys, ensure_ascii=ensure_ascii, separators=(",", ":")
    )
    if not ensure_ascii and isinstance(value, str) and not value.isascii():
        assert not write(value).isascii()  # held as UTF-8, not escaped


def test_every_integer_of_the_short_digits_fits_its_bits() -> None:
    assert (10**payloads.SHORT_DIGITS - 1).bit_length() <= MAX_INT_BITS
    assert (10 ** (payloads.SHORT_DIGITS + 1) - 1).bit_length() > MAX_INT_BITS


def _check(datamodel: dict[str, Any], limits: MacrostepLimits) -> bool:
    try:
        payloads.check_datamodel(datamodel, limits)
    except CorruptPosition:
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(
    datamodel=st.dictionaries(_TEXT, _ODD | _JSON, max_size=4),
    cap=st.sampled_from([None, 1, 64, 400, 4000, 2**24]),
)
def test_what_dumps_vouches_for_the_full_check_accepts(
    datamodel: dict[str, Any], cap: int | None
) -> None:
    limits = MacrostepLimits(datamodel_bytes=cap)
    texts: list[str | bytes] = []
    with contextlib.suppress(TypeError, ValueError, RecursionError):
        texts.append(encode_json(datamodel))  # else the checked path refuses it first
    written = _orjson(datamodel)
    if written is not None:
        texts.append(written)  # the plain path's text
    for text in texts:
        vouched = payloads.fits(text, MAX_LIMIT if cap is None else cap) and payloads.json_typed(
            datamodel
        )
        if vouched:
            assert _check(datamodel, limits)


@settings(max_examples=400, deadline=None)
@given(
    datamodel=st.dictionaries(_TEXT, _JSON, max_size=4),
    cap=st.sampled_from([1, 64, 400, 2**24]),
)
def test_what_loads_vouches_for_the_full_check_accepts(datamodel: dict[str, Any], cap: int) -> None:
    text = json.dumps({"datamodel": datamodel}, ensure_ascii=False, separators=(",", ":"))
    decoded = DECODER.decode(text)["datamodel"]
    if payloads.fits(text, cap):
        assert _check(decoded, MacrostepLimits(datamodel_bytes=cap))
    written = _orjson({"datamodel": datamodel})
    if written is not None and payloads.fits(written, cap):
        assert _check(orjson.loads(written)["datamodel"], MacrostepLimits(datamodel_bytes=cap))


def test_deep_long_and_large_datamodels_are_still_measured() -> None:
    deep: Any = []
    for _ in range(300):
        deep = [deep]
    long_number = 10**4250
    for encode in (encode_json, lambda value: encode_json(value).encode("ascii")):
        assert not payloads.fits(encode({"x": deep}), 2**62)
        assert not payloads.fits(encode({"x": long_number, "pad": "y" * 10}), 2**62)
        assert not payloads.fits(encode({"x": "y" * 100}), 1000)
        assert payloads.fits(encode({"x": "y" * 100}), 12 * 110)
    assert not _check({"x": deep}, DEFAULT_LIMITS)
    assert not _check({"x": long_number}, DEFAULT_LIMITS)


class _Key(str):
    """A string key that is not an exact ``str``."""


@settings(max_examples=400, deadline=None)
@given(value=_ODD | _JSON | st.dictionaries(st.builds(_Key, _TEXT), _JSON, min_size=1, max_size=2))
def test_what_orjson_writes_needs_no_key_read(value: Any) -> None:
    # The plain path of ``dumps`` walks what orjson wrote without reading keys
    # (``json_typed(..., False)``): orjson writes no key but an exact ``str``.
    try:
        orjson.dumps({"v": value}, option=_format3._OPTIONS)
    except TypeError:
        return  # not written: the checked path decides
    assert payloads.json_typed(value, False) == payloads.json_typed(value)


def test_a_key_that_is_not_an_exact_string_is_not_written_plainly(machine: Machine) -> None:
    state = _replace(_state(machine), datamodel={**_state(machine).datamodel, _Key("k"): 1})
    assert _format3.plain_body(state) is None  # the checked path writes it, as a string
    loaded = loads(dumps(state), machine)
    assert loaded == state
    assert all(type(name) is str for name in loaded.datamodel)


class _Location(dict[str, Any]):
    """A dict that is not an exact ``dict``."""


@pytest.mark.parametrize("where", ["key", "location", "processor"])
def test_standard_processors_of_other_types_are_not_left_out(machine: Machine, where: str) -> None:
    state = _state(machine)
    processors = dict(state.datamodel["_ioprocessors"])
    location = processors["scxml"]["location"]
    if where == "key":
        processors[_Key("scxml")] = processors.pop("scxml")
    elif where == "location":
        processors["scxml"] = {"location": _Key(location)}
    else:
        processors["scxml"] = _Location(location=location)
    assert processors == state.datamodel["_ioprocessors"]  # equal, of other types
    odd = _replace(state, datamodel={**state.datamodel, "_ioprocessors": processors})
    assert _format3.plain_body(odd) is None  # the checked path decides
    try:
        blob = dumps(odd)
    except UnserializablePosition:
        return  # refused there
    assert orjson.loads(blob.split(b"\n")[5])[blobs.STANDARD] is False  # not left out


@pytest.mark.parametrize(
    "value",
    [(1, 2), {1: "a"}, {"k": (1,)}, [{"k": {None: 1}}], b"bytes", 1j, [float("nan")], -math.inf],
)
def test_dumps_refuses_what_its_type_walk_refuses(machine: Machine, value: Any) -> None:
    state = _state(machine)
    bad = {**state.datamodel, "v": value}
    assert not payloads.json_typed(bad)
    with pytest.raises(UnserializablePosition, match=r"datamodel\['v'\]"):
        dumps(_replace(state, datamodel=bad))


def _replace(state: MachineState, **changes: Any) -> MachineState:
    return dataclasses.replace(state, **changes)


# -- the payload text ----------------------------------------------------------------------


def test_the_plain_path_writes_what_the_checked_path_writes(machine: Machine) -> None:
    state = _state(machine, trace=True, max_macrostep_rounds=None)
    busy = _replace(
        state, caller_context={"who": "h\u00f6st", "seq": 3}, session_id='sess \u2603 "quoted"'
    )
    plain = _format3.plain_body(busy)
    assert plain is not None
    assert plain == position._checked_body(busy)
    assert loads(dumps(busy), machine) == busy
    event = statifier.Event(name="e", data={"\u00e9": [1.5, None]}, caller_context=[1])
    queued = _replace(busy, internal_queue=(event, event))
    assert _format3.plain_body(queued) is None  # queued events take the checked path
    assert loads(dumps(queued), machine) == queued


# -- loads: what steps aside still refuses -------------------------------------------------


def test_a_payload_with_whitespace_in_it_loads_the_slow_way(machine: Machine) -> None:
    state = _state(machine)
    blob = dumps(state)
    spaced = b"\n".join(
        json.dumps(json.loads(line), indent=None).encode() + b" "
        for line in blob.split(b"\n", 4)[4].split(b"\n")
    )
    assert loads(_reframe(blob, spaced), machine) == state
    with pytest.raises(CorruptPosition, match="not valid JSON"):
        loads(_reframe(blob, spaced + b"{}"), machine)


@pytest.mark.parametrize("where", ["datamodel", "caller_context"])
def test_numbers_that_read_as_infinite_are_refused(machine: Machine, where: str) -> None:
    blob = dumps(_state(machine))
    payload = _payload(blob)
    payload[where] = {**payload["datamodel"], "x": 1.5} if where == "datamodel" else 1.5
    body = blobs.body(payload).replace(b"1.5", b"1e999")
    with pytest.raises(CorruptPosition, match="not a finite number"):
        loads(_reframe(blob, body), machine)


@pytest.mark.parametrize("bad", [True, 1.0, 0, -1, "1", 2**63])
def test_budgets_of_the_wrong_type_are_refused_past_the_memo(machine: Machine, bad: Any) -> None:
    blob = dumps(_state(machine))
    payload = _payload(blob)
    payload["limits"]["effects"] = bad
    with pytest.raises(CorruptPosition, match=r"limits\.effects"):
        loads(_reframe(blob, blobs.body(payload)), machine)


def test_a_long_integer_in_a_long_payload_is_measured(machine: Machine) -> None:
    blob = dumps(_state(machine))
    payload = _payload(blob)
    payload["datamodel"]["x"] = 10**4250
    with pytest.raises(CorruptPosition, match=r"datamodel\['x'\]"):
        loads(_reframe(blob, blobs.body(payload)), machine)


def test_numbers_orjson_reads_differently_take_the_full_path(machine: Machine) -> None:
    blob = dumps(_state(machine))
    payload = _payload(blob)
    payload["datamodel"]["big"] = 2**64  # orjson reads it as a float
    payload["datamodel"]["small"] = 1e-05  # written by orjson as 0.00001
    loaded = loads(_reframe(blob, blobs.body(payload)), machine)
    assert type(loaded.datamodel["big"]) is int
    assert loaded.datamodel["big"] == 2**64
    assert loaded.datamodel["small"] == 1e-05


def test_a_duplicate_key_orjson_would_accept_is_refused(machine: Machine) -> None:
    blob = dumps(_state(machine))
    shape_line, values_line = blob.split(b"\n", 4)[4].split(b"\n")
    # Format 3's values object.
    members = _payload(blob)
    values = {name: value for name, value in members.items() if name not in payloads.SHAPE_KEYS}
    values_object = orjson.dumps(values, option=_ORJSON)
    doubled = values_object[:-1] + b',"macrostep":0}'
    assert orjson.loads(doubled)["macrostep"] == 0
    with pytest.raises(CorruptPosition, match="duplicate key 'macrostep'"):
        loads(_reframe(blob, shape_line + b"\n" + doubled, version=3), machine)
    # Format 4's array: a key of its datamodel.
    doubled = values_line.replace(b'"n":', b'"n":0,"n":', 1)
    assert doubled != values_line
    assert orjson.loads(doubled)
    with pytest.raises(CorruptPosition, match="duplicate key 'n'"):
        loads(_reframe(blob, shape_line + b"\n" + doubled), machine)
    shape_doubled = shape_line[:-1] + b',"trace":true}'
    with pytest.raises(CorruptPosition, match="duplicate key 'trace'"):
        loads(_reframe(blob, shape_doubled + b"\n" + values_line), machine)


@pytest.mark.parametrize("version", [3, 4])
def test_a_values_line_with_keys_out_of_order_reads_in_place_as_the_full_read_reads_it(
    machine: Machine, version: int
) -> None:
    # The plain read writes the values back in the order it read them: keys out of order
    # (which the full read accepts as the same state) read in place; a duplicate key, in
    # any order, still writes back to other bytes and is for the full read to refuse.
    state = _state(machine)
    blob = dumps(state)
    shape_line = blobs.split(blob)[1].split(b"\n")[0]
    values = {
        name: value for name, value in _payload(blob).items() if name not in payloads.SHAPE_KEYS
    }
    datamodel = values["datamodel"]
    values["datamodel"] = {
        name: dict(reversed(value.items())) if type(value) is dict else value
        for name, value in reversed(datamodel.items())
    }
    line = blobs.values_row(values) if version == 4 else dict(reversed(values.items()))
    unsorted = orjson.dumps(line)
    assert unsorted != orjson.dumps(line, option=_ORJSON)  # out of order, and canonical else
    reordered = _reframe(blob, shape_line + b"\n" + unsorted, version=version)
    plain = _format3._plain_read(
        shape_line, unsorted, machine, None, None, DEFAULT_LIMITS, version == 4
    )
    assert plain == state
    assert plain == _format3._full_read(
        shape_line + b"\n" + unsorted, machine, None, None, DEFAULT_LIMITS, array=version == 4
    )
    assert loads(reordered, machine) == state
    assert dumps(loads(reordered, machine)) == blob  # written back in order
    doubled = unsorted.replace(b'{"n":', b'{"n":0,"n":', 1)
    assert doubled != unsorted
    assert orjson.loads(doubled)
    assert (
        _format3._plain_read(shape_line, doubled, machine, None, None, DEFAULT_LIMITS, version == 4)
        is None
    )
    with pytest.raises(CorruptPosition, match="duplicate key 'n'"):
        loads(_reframe(blob, shape_line + b"\n" + doubled, version=version), machine)


def test_a_machine_keeps_the_unkeyed_header_both_ways_read(machine: Machine) -> None:
    # ``dumps`` and ``loads`` read the header of an unkeyed position from the machine's
    # cache: the one ``_plain_head`` gives for its identity, and no other machine's.
    other = statifier.compile(CHART.replace('initial="a"', 'initial="b"'))
    blob = dumps(_state(machine))
    assert machine._cache[position._PLAIN_HEAD] == position._plain_head(machine.identity)
    assert blob.startswith(position._plain_head(machine.identity))
    with pytest.raises(position.IdentityMismatch):
        loads(blob, other)
    assert other._cache[position._PLAIN_HEAD] == position._plain_head(other.identity)
    assert other._cache[position._PLAIN_HEAD] != machine._cache[position._PLAIN_HEAD]
    assert loads(blob, machine) == _state(machine)


def test_loads_of_two_shapes_in_turn_read_each_its_own() -> None:
    # ``read_unkeyed`` compares a blob's shape line with the one the machine read last
    # before it looks in the memo: loads of states in two configurations, in turn, each
    # read back their own, and another shape line is not taken for the last one.
    machine = statifier.compile(CHART)
    in_b = _state(machine)
    in_a, _ = statifier.handle_event(in_b, "go")
    blobs_of = {state.configuration_ids(): (state, dumps(state)) for state in (in_a, in_b)}
    assert len({blob.split(b"\n")[4] for _, blob in blobs_of.values()}) == 2
    for _ in range(3):
        for state, blob in blobs_of.values():
            assert loads(blob, machine) == state
            line, _known, last = machine._cache[_format3._LAST_SHAPE]
            assert line == last + b"\n"
            assert last == blob.split(b"\n")[4]
    state, blob = blobs_of[("b",)]
    shape, values = blob.split(b"\n")[4:6]
    assert b'"trace":false' in shape
    other = _reframe(blob, shape.replace(b'"trace":false', b'"trace":true') + b"\n" + values)
    assert machine._cache[_format3._LAST_SHAPE][2] == shape
    assert loads(other, machine).trace is True
    assert loads(blob, machine) == state


# -- dumps: the plain path writes what the checked path writes -----------------------------

RICH = """\
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" initial="main">
  <datamodel><data id="n" expr="0"/></datamodel>
  <state id="main" initial="p">
    <parallel id="p">
      <state id="left" initial="l1">
        <history id="lh" type="deep"><transition target="l1"/></history>
        <state id="l1"><transition event="go" target="l2"/></state>
        <state id="l2"/>
      </state>
      <state id="right" initial="r1">
        <invoke type="worker" id="w"/>
        <state id="r1"/>
      </state>
      <transition event="leave" target="away"/>
    </parallel>
    <state id="away"><transition event="back" target="lh"/></state>
  </state>
  <final id="end"/>
</scxml>
"""
WORKER = frozenset({"worker"})


@pytest.fixture(scope="module")
def rich() -> Machine:
    return statifier.compile(RICH)


def _rich_states(machine: Machine) -> list[MachineState]:
    state, _ = statifier.initialize(machine, session_id="sess_rich", invoke_types=WORKER)
    states = [state]
    for event in ("go", "leave", "back"):
        state, _ = statifier.handle_event(state, event)
        states.append(state)
    return states


_INDEXES = st.lists(st.integers(-1, 12) | st.booleans(), max_size=6)
_COUNTER = st.integers(-1, 3) | st.just(2**62) | st.just(2**62 + 1) | st.booleans() | st.none()
_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "configuration": _INDEXES.map(frozenset) | _INDEXES | _INDEXES.map(tuple),
    "entered": _INDEXES.map(frozenset) | _INDEXES.map(set),
    "states_to_invoke": _INDEXES.map(tuple) | _INDEXES,
    "history": st.dictionaries(st.integers(0, 12), _INDEXES.map(tuple), max_size=2),
    "invocations": st.dictionaries(
        st.tuples(st.integers(0, 12), st.integers(-1, 1)), st.sampled_from(["", "w", "x"])
    ),
    "running": st.booleans() | st.just(1),
    "status": st.sampled_from(["running", "done", "other"]),
    "trace": st.booleans() | st.just(0),
    "max_macrostep_rounds": st.none() | st.integers(-1, 3) | st.just(2**63) | st.just(True),
    "session_id": st.sampled_from(["", "s", "s" * 5000, "\u00e9t\u00e9"]) | st.integers(),
    "invoke_counter": _COUNTER,
    "send_counter": _COUNTER,
    "timer_counter": _COUNTER,
    "macrostep": _COUNTER,
    "microstep": _COUNTER,
    "round": _COUNTER,
    "caller_context": _ODD | _JSON,
    "datamodel": st.dictionaries(_TEXT, _ODD | _JSON, max_size=3).map(
        lambda extra: {"n": 0, **extra}
    ),
    "limits": st.sampled_from(
        [DEFAULT_LIMITS, MacrostepLimits(datamodel_bytes=40), MacrostepLimits(steps=None)]
    ),
    "internal_queue": st.sampled_from([(), (statifier.Event(name="e"),)]),
}


def _outcome(call: Any) -> str:
    try:
        return str(call())
    except UnserializablePosition as exc:
        return f"refused: {exc}"


@settings(max_examples=600, deadline=None)
@given(
    which=st.integers(0, 3),
    changes=st.dictionaries(st.sampled_from(sorted(_FIELDS)), st.none(), max_size=3).flatmap(
        lambda chosen: st.fixed_dictionaries({name: _FIELDS[name] for name in chosen})
    ),
)
def test_the_plain_path_writes_only_what_the_checked_path_writes(
    rich: Machine, which: int, changes: dict[str, Any]
) -> None:
    state = _replace(_rich_states(rich)[which], **changes)
    plain = _format3.plain_body(state)
    checked = _outcome(lambda: position._checked_body(state))
    if plain is not None:
        assert checked == str(plain)
    if not changes:
        assert plain is not None  # the engine's own states take the plain path


def test_the_engine_s_own_states_take_the_plain_path(rich: Machine) -> None:
    states = _rich_states(rich)
    assert any(s.history for s in states)
    assert any(s.invocations for s in states)
    for state in states:
        plain = _format3.plain_body(state)
        assert plain is not None
        assert plain == position._checked_body(state)
        # The shape line is remembered: the second write takes it from the memo.
        assert _format3.plain_body(state) == plain


@pytest.mark.parametrize("field", ["history", "invocations"])
def test_a_state_broken_twice_is_judged_by_the_checked_path(rich: Machine, field: str) -> None:
    state = _replace(_rich_states(rich)[1], datamodel={"n": b"x"}, **{field: [1]})
    assert _format3.plain_body(state) is None
    with pytest.raises(UnserializablePosition, match=r"datamodel\['n'\]"):
        dumps(state)


# -- loads: the plain read accepts only what the full read accepts --------------------------

_SMALL_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 2**64) | st.floats(-1e6, 1e6) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=6,
)
_MEMBERS: dict[str, st.SearchStrategy[Any]] = {
    "configuration": st.lists(st.integers(-1, 12), max_size=6).map(sorted),
    "entered": st.lists(st.integers(-1, 12), max_size=8).map(sorted),
    "states_to_invoke": st.lists(st.integers(-1, 12), max_size=2),
    "history": st.lists(
        st.tuples(st.integers(0, 12), st.lists(st.integers(0, 12), max_size=2)), max_size=2
    ).map(lambda pairs: [list(pair) for pair in pairs]),
    "invocations": st.lists(
        st.tuples(st.integers(0, 12), st.integers(-1, 1), st.sampled_from(["", "w", "v"])),
        max_size=2,
    ).map(lambda triples: [list(t) for t in triples]),
    "limits": st.fixed_dictionaries(
        {
            name: st.none() | st.integers(0, 2**63)
            for name in ("steps", "effects", "internal_events", "output_bytes", "datamodel_bytes")
        }
    ),
    "max_macrostep_rounds": st.none() | st.integers(-1, 2**63) | st.booleans(),
    "running": st.booleans() | st.just(1),
    "status": st.sampled_from(["running", "done", "x"]),
    "trace": st.booleans() | st.just(0),
    "session_id": st.sampled_from(["", "s", "sess_rich", "s" * 5000]) | st.integers(),
    "macrostep": st.integers(-1, 2**63) | st.just(1.0) | st.booleans(),
    "timer_counter": st.integers(-1, 3) | st.none(),
    "caller_context": _SMALL_JSON,
    "datamodel": st.dictionaries(
        _TEXT | st.sampled_from(["_name", "_sessionid", "_ioprocessors", "n"]),
        _SMALL_JSON,
        max_size=3,
    ),
    "internal_queue": st.sampled_from([[], [{}], "x"]),
    blobs.STANDARD: st.booleans() | st.just(1) | st.none(),
}


def _read_outcome(call: Any) -> Any:
    try:
        return call()
    except CorruptPosition as exc:
        return f"refused: {exc}"


@settings(max_examples=600, deadline=None)
@given(
    which=st.integers(0, 3),
    changes=st.dictionaries(st.sampled_from(sorted(_MEMBERS)), st.none(), max_size=3).flatmap(
        lambda chosen: st.fixed_dictionaries({name: _MEMBERS[name] for name in chosen})
    ),
    ceiling=st.sampled_from([DEFAULT_LIMITS, None, MacrostepLimits(steps=10**8)]),
    array=st.booleans(),
)
def test_the_plain_read_accepts_only_what_the_full_read_accepts(
    rich: Machine,
    which: int,
    changes: dict[str, Any],
    ceiling: MacrostepLimits | None,
    array: bool,
) -> None:
    state = _rich_states(rich)[which]
    members = _payload(dumps(state))
    members.update(changes)
    shape = {name: members[name] for name in payloads.SHAPE_KEYS}
    values = {name: value for name, value in members.items() if name not in shape}
    # Format 4's values array, or format 3's object.
    shape_text, values_text = _orjson(shape), _orjson(blobs.values_row(values) if array else values)
    if shape_text is None or values_text is None:
        return  # orjson cannot write it: no blob ``dumps`` writes looks like this
    body = shape_text + b"\n" + values_text
    plain = _read_outcome(
        lambda: _format3._plain_read(shape_text, values_text, rich, WORKER, None, ceiling, array)
    )
    full = _read_outcome(
        lambda: _format3._full_read(body, rich, WORKER, None, ceiling, array=array)
    )
    if isinstance(plain, MachineState):  # else it stepped aside: the full path says why
        assert plain == full
    if not changes:
        assert plain == state  # what dumps writes takes the plain path


# -- loads: the common values line, checked in place ----------------------------------------

_DEEP: Any = "x"
for _ in range(300):
    _DEEP = [_DEEP]

# Each changes one member of a position's values line, written as orjson writes it, so
# that the plain read (and its checks in place, ``_format3._plain_state``) sees it first.
_BROKEN_VALUES: dict[str, tuple[dict[str, Any], str]] = {
    "macrostep past the largest counter": ({"macrostep": MAX_LIMIT + 1}, "macrostep is larger"),
    "a negative send counter": ({"send_counter": -1}, "send_counter is negative"),
    "a boolean round": ({"round": True}, "round is a bool"),
    "a float timer counter": ({"timer_counter": 1.0}, "timer_counter is a float"),
    "an empty session id": ({"session_id": ""}, "session_id is empty"),
    "a session id too long": ({"session_id": "s" * 5000}, "session_id is longer"),
    "a session id that is a number": ({"session_id": 7}, "session_id is a int"),
    "a left-out system variable present": (
        {"datamodel": {"n": 1, "_name": "other"}},
        "holds a system variable",
    ),
    "a datamodel that is a list": ({"datamodel": []}, "datamodel is a list"),
    "a datamodel nested too deeply": ({"datamodel": {"n": _DEEP}}, "nested more than"),
    "a missing member in place of another": ({"round": None, "rounds": 1}, "missing"),
    "a value short": ({"round": None}, "missing|holds 11 values, not 12"),
    "a value more": ({"rounds": 1}, "unexpected|holds 13 values, not 12"),
}
_NAMES_ONLY: Final = frozenset({"a missing member in place of another"})
"""Cases of format 3's names: format 4's array has none (its own are the length cases)."""


def _values_line_blob(
    blob: bytes, changes: dict[str, Any], version: int = 4
) -> tuple[bytes, bytes, bytes]:
    """``blob`` with ``changes`` to its values line (a None value removes the member), in
    format ``version`` (4: the array, 3: the object), both lines as orjson writes them
    (for these values): the blob and its two lines."""
    shape_line = blobs.split(blob)[1].split(b"\n")[0]
    values = {
        name: value for name, value in _payload(blob).items() if name not in payloads.SHAPE_KEYS
    }
    for name, value in changes.items():
        if value is None:
            del values[name]
        else:
            values[name] = value
    # ASCII, compact and sorted: what orjson writes, and deeper than it writes.
    line = blobs.values_row(values) if version == 4 else values
    changed = json.dumps(line, sort_keys=True, separators=(",", ":")).encode("ascii")
    return _reframe(blob, shape_line + b"\n" + changed, version=version), shape_line, changed


@pytest.mark.parametrize(
    ("case", "version"),
    [
        (case, version)
        for case in sorted(_BROKEN_VALUES)
        for version in (3, 4)
        if version == 3 or case not in _NAMES_ONLY
    ],
)
def test_the_plain_read_checks_the_common_values_line_in_place(
    machine: Machine, case: str, version: int
) -> None:
    changes, message = _BROKEN_VALUES[case]
    blob = dumps(_state(machine))
    broken, shape_line, values_line = _values_line_blob(blob, changes, version)
    # Weaken any check the plain read makes in place and it hands back a state here.
    array = version == 4
    plain = _read_outcome(
        lambda: _format3._plain_read(
            shape_line, values_line, machine, None, None, DEFAULT_LIMITS, array
        )
    )
    assert not isinstance(plain, MachineState)
    with pytest.raises(CorruptPosition, match=message):
        loads(broken, machine)


def test_the_plain_read_holds_the_stored_budgets_against_the_host_s_ceiling(
    machine: Machine,
) -> None:
    state = _state(machine)
    blob = dumps(state)
    shape_line, values_line = blobs.split(blob)[1].split(b"\n")
    lower = MacrostepLimits(steps=1000)
    plain = _read_outcome(
        lambda: _format3._plain_read(shape_line, values_line, machine, None, None, lower)
    )
    assert not isinstance(plain, MachineState)
    with pytest.raises(CorruptPosition, match=r"limits\.steps is 10000000"):
        loads(blob, machine, max_limits=lower)
    # With no ceiling, or the stored budgets' own, the same line reads in place.
    for ceiling in (None, DEFAULT_LIMITS):
        assert _format3._plain_read(shape_line, values_line, machine, None, None, ceiling) == state


def test_a_short_text_vouches_only_within_the_cap_and_a_longer_one_is_read() -> None:
    short = b'{"n":' + b"[" * 200 + b"]" * 200 + b"}"
    assert len(short) <= payloads.SHORT_TEXT
    assert payloads.fits(short, 12 * len(short))
    assert not payloads.fits(short, 12 * len(short) - 1)
    # Past the short texts the brackets are counted: 257 of them vouch for nothing.
    deep = b'{"n":' + b"[" * 257 + b"]" * 257 + b"}"
    assert len(deep) > payloads.SHORT_TEXT
    assert not payloads.fits(deep, 2**62)
    assert not payloads.fits(deep.decode(), 2**62)


def test_a_short_values_line_vouches_only_within_its_cap_on_both_plain_paths(
    machine: Machine,
) -> None:
    # Both plain paths judge a short values line in place, as ``fits`` does: unread, but
    # only within the cap. Past it the datamodel is measured, and this one is over its cap.
    small = MacrostepLimits(datamodel_bytes=100)
    over = {"n": 1, "x": "y" * 200}
    state = _replace(_state(machine, limits=small), datamodel={**_state(machine).datamodel, **over})
    assert _format3.plain_body(state) is None
    with pytest.raises(UnserializablePosition, match="datamodel"):
        dumps(state)
    blob = dumps(_state(machine, limits=small))
    broken, shape_line, values_line = _values_line_blob(blob, {"datamodel": over})
    assert 12 * len(values_line) > small.datamodel_bytes  # type: ignore[operator]
    assert len(values_line) <= payloads.SHORT_TEXT  # short: it vouches unread within the cap
    plain = _read_outcome(
        lambda: _format3._plain_read(shape_line, values_line, machine, None, None, None)
    )
    assert not isinstance(plain, MachineState)
    with pytest.raises(CorruptPosition, match="datamodel"):
        loads(broken, machine, max_limits=small)


def test_counters_each_within_the_largest_round_trip_whatever_their_bitwise_or(
    machine: Machine,
) -> None:
    # The plain paths range-check the six counters by their bitwise or, which can pass the
    # largest counter when none of them does: the checked paths then decide, and accept.
    state = _replace(_state(machine), macrostep=payloads.MAX_COUNTER, microstep=1)
    assert state.macrostep | state.microstep > payloads.MAX_COUNTER
    blob = dumps(state)
    assert loads(blob, machine) == state
    assert dumps(loads(blob, machine)) == blob


def test_a_remembered_shape_line_s_crc_starts_the_payload_s(machine: Machine) -> None:
    # Both plain paths continue the CRC-32 remembered with a shape line over the values
    # line: it is the payload's own, and an unkeyed position ``dumps`` wrote reads in one
    # comparison of its header (the plain path steps aside for no such position).
    state = _state(machine)
    blob = dumps(state)
    header, body = blobs.split(blob)
    assert header[3] == b"crc32:%08x" % zlib.crc32(body)
    head = position._plain_head(machine.identity)
    for _ in range(2):  # the shape line judged, then remembered
        assert _format3.read_unkeyed(blob, head, machine, None, None, DEFAULT_LIMITS) == state
    assert dumps(state) == blob
    # Another chart's header, or another digest, is for the checks line by line.
    assert _format3.read_unkeyed(blob, head + b"x", machine, None, None, DEFAULT_LIMITS) is None
    altered = blob.replace(b'"sess_fast"', b'"sess_fash"')
    assert _format3.read_unkeyed(altered, head, machine, None, None, DEFAULT_LIMITS) is None


# -- dumps: an ECMAScript view of the engine's own state vouches for its chart variables ----

ECMA = """\
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"
       name="ecma" initial="a">
  <datamodel>
    <data id="v" expr="({$ref: 0, $$x: 1, u: undefined, f: function () {}, t: 'h\\u00f6st',
      n: [undefined, NaN, -0, Infinity, 1.5, 2e300], m: new Map([[1, 2]]), r: /x/g,
      b: 12345678901234567890n, nul: null})"/>
    <data id="o" expr="({k: [1, {deep: true}]})"/><data id="p" expr="o"/>
    <data id="ev"/><data id="big" expr="2 ** 70"/>
  </datamodel>
  <state id="a">
    <transition event="keep"><assign location="ev" expr="_event.data"/></transition>
    <transition event="loop"><assign location="o.self" expr="o"/></transition>
  </state>
</scxml>
"""


@pytest.fixture(scope="module")
def ecma() -> Machine:
    return statifier.compile(ECMA)


def _ecma_states(machine: Machine) -> list[MachineState]:
    state, _ = statifier.initialize(machine, session_id="sess_ecma")
    states = [state]
    for event in (
        statifier.Event(name="keep", data={"$y": [1, {"z": None}], "w": "\u2603"}),
        statifier.Event(name="loop"),
    ):
        state, _ = statifier.handle_event(state, event)
        states.append(state)
    return states


def test_the_engine_s_ecmascript_views_vouch_and_write_what_the_checked_path_writes(
    ecma: Machine,
) -> None:
    for state in _ecma_states(ecma):
        assert state.datamodel.chart_json_typed is True  # type: ignore[attr-defined]
        plain = _format3.plain_body(state)
        assert plain is not None
        assert plain == position._checked_body(state)
        loaded = loads(dumps(state), ecma)
        # A view made from a stored form never vouches (its values were not the engine's).
        assert loaded.datamodel.chart_json_typed is False  # type: ignore[attr-defined]
        assert dumps(loaded) == dumps(state)
        nonstandard = _replace(state, session_id="sess_other")  # the system variables stay
        assert _format3.plain_body(nonstandard) == position._checked_body(nonstandard)


def _ecma_view(system: dict[str, Any], chart: dict[str, Any], engine: bool) -> Any:
    from statifier.datamodel.ecmascript.view import VariablesView, engine_view

    names = frozenset(name for name in chart if name != "#objects")
    if engine:
        return engine_view(system, names, lambda: chart)
    return VariablesView(system, names, chart)


@pytest.mark.parametrize(
    "value", [(1, 2), {"k": (1,)}, [float("nan")], math.inf, {1: "a"}, [{"k": {None: 1}}]]
)
@pytest.mark.parametrize("how", ["constructed", "from_stored"])
def test_a_view_given_its_stored_form_vouches_for_nothing(
    ecma: Machine, value: Any, how: str
) -> None:
    from statifier.datamodel.ecmascript.view import VariablesView

    state = _ecma_states(ecma)[1]
    system = dict(state.datamodel.system)  # type: ignore[attr-defined]
    chart = {"n": 1, "v": value}
    view = (
        _ecma_view(system, chart, engine=False)
        if how == "constructed"
        else VariablesView.from_stored({**system, **chart})
    )
    assert view.chart_json_typed is False
    bad = _replace(state, datamodel=view)
    assert _format3.plain_body(bad) is None
    with pytest.raises(UnserializablePosition, match=r"datamodel\['v'\]"):
        dumps(bad)


@pytest.mark.parametrize("standard", [True, False])
@pytest.mark.parametrize(
    "value", [(1, 2), {"k": (1,)}, [float("nan")], -math.inf, {1: "a"}, b"x", [{"k": {2: 1}}]]
)
def test_a_vouching_view_s_system_variables_are_still_checked(
    ecma: Machine, standard: bool, value: Any
) -> None:
    state = _ecma_states(ecma)[1]
    system = dict(state.datamodel.system)  # type: ignore[attr-defined]
    if not standard:
        system["_name"] = "renamed"  # every system variable is then stored as it is
    good = _replace(state, datamodel=_ecma_view(system, {"n": 1}, engine=True))
    assert good.datamodel.chart_json_typed is True  # type: ignore[attr-defined]
    assert _format3.plain_body(good) == position._checked_body(good)
    names = ["_event"] if standard else ["_event", "_name", "_sessionid", "_ioprocessors"]
    for name in names:
        broken = {**system, name: {"data": value} if name == "_event" else value}
        bad = _replace(state, datamodel=_ecma_view(broken, {"n": 1}, engine=True))
        assert _format3.plain_body(bad) is None, name
        with pytest.raises(UnserializablePosition):
            dumps(bad)


def _format_3(blob: bytes) -> bytes:
    """``blob`` (format 4) rewritten as format 3 writes it: the values line an object with
    sorted keys, as orjson writes it (or, where it cannot, the standard library), under a
    SHA-256."""
    shape_line = blobs.split(blob)[1].split(b"\n")[0]
    members = _payload(blob)
    values = {name: value for name, value in members.items() if name not in payloads.SHAPE_KEYS}
    line = _orjson(values) or json.dumps(values, sort_keys=True, separators=(",", ":")).encode()
    return _reframe(blob, shape_line + b"\n" + line, version=3)


@pytest.mark.parametrize("datamodel", ["python", "ecmascript"])
def test_positions_of_both_datamodels_round_trip_in_formats_3_and_4(
    rich: Machine, ecma: Machine, datamodel: str
) -> None:
    chart, states = (
        (ecma, _ecma_states(ecma)) if datamodel == "ecmascript" else (rich, _rich_states(rich))
    )
    for state in states:
        blob = dumps(state)
        assert blobs.split(blob)[0][1] == b"4"
        loaded = loads(blob, chart, invoke_types=WORKER)
        assert loaded.datamodel == state.datamodel
        assert dumps(loaded) == blob
        # The same position in format 3 loads as the same state, and is written back as 4.
        old = loads(_format_3(blob), chart, invoke_types=WORKER)
        assert old == loaded
        assert dumps(old) == blob


# -- the plain paths' steps taken once (issue 25, fifth round) ------------------------------


_NEAR_SHORT = st.integers(payloads.SHORT_TEXT - 2, payloads.SHORT_TEXT + 2)


@settings(max_examples=400, deadline=None)
@given(
    text=st.binary(max_size=700)
    | st.text(max_size=700)
    # Around the short texts' length: brackets or digits enough to vouch for nothing.
    | st.builds(lambda char, size: char * size, st.sampled_from([b"[", b"1", "{"]), _NEAR_SHORT),
    cap=st.sampled_from([None, 1, 11, 12, 13, 100, 6155, 6156, 6157, 2**62]),
)
def test_the_unread_length_is_the_first_case_of_fits(text: str | bytes, cap: int | None) -> None:
    # Both plain paths test ``len(line) <= unread_length(limits) or fits(line, cap)``:
    # the same verdict as ``fits`` alone, its first case in one comparison.
    limits = MacrostepLimits(datamodel_bytes=cap)
    most = MAX_LIMIT if cap is None else cap
    assert payloads.datamodel_cap(limits) == most
    unread = len(text) <= payloads.unread_length(limits)
    assert (unread or payloads.fits(text, most)) == payloads.fits(text, most)
    if len(text) <= payloads.SHORT_TEXT:
        assert unread == payloads.fits(text, most)


_COUNTER_VALUES = (
    st.integers(-2, 3)
    | st.integers(MAX_LIMIT - 2, MAX_LIMIT + 2)
    | st.integers(2**63, 2**64)
    | st.booleans()
    | st.sampled_from([1.0, 0.0, None, "1", [1], {"k": 1}])
    | st.builds(lambda n: _Int(n), st.integers(0, 3))
)


class _Int(int):
    """An integer that is not an exact ``int``."""


@settings(max_examples=500, deadline=None)
@given(
    values=st.lists(st.integers(0, 3), min_size=6, max_size=6),
    odd=st.dictionaries(st.integers(0, 5), _COUNTER_VALUES, max_size=2),
)
def test_counters_fit_only_as_the_checked_paths_accept_them(
    values: list[Any], odd: dict[int, Any]
) -> None:
    # What both plain paths let through, the checked paths (``_payload._counter``) accept.
    for place, value in odd.items():
        values[place] = value
    try:
        fit = _format3._counters_fit(*values)
    except TypeError:
        return  # the plain paths catch it and step aside
    if fit:
        assert all(type(value) is int and 0 <= value <= MAX_LIMIT for value in values)
    if all(type(value) is int and 0 <= value <= 3 for value in values):
        assert fit


@pytest.mark.parametrize("name", ["_name", "_sessionid", "_ioprocessors"])
@pytest.mark.parametrize("which", ["nameless", "named"])
def test_a_missing_system_variable_keeps_them_all_on_both_paths(
    machine: Machine, name: str, which: str
) -> None:
    # The plain path reads the three by subscript: one missing leaves none out, as the
    # checked path's ``standard_system_variables`` says (a nameless chart's missing
    # ``_name`` included, whose ``machine.name`` is None).
    if which == "named":
        machine = statifier.compile(CHART.replace('initial="a"', 'name="named" initial="a"'))
    state = _state(machine)
    assert (state.machine.name is None) == (which == "nameless")
    datamodel = dict(state.datamodel)
    del datamodel[name]
    odd = _replace(state, datamodel=datamodel)
    plain = _format3.plain_body(odd)
    assert plain is not None
    assert plain == position._checked_body(odd)
    assert orjson.loads(plain.split(b"\n")[1])[10] is False  # ``standard_system_variables``


@settings(max_examples=300, deadline=None)
@given(value=_ODD | _JSON | st.dictionaries(st.builds(_Key, _TEXT), _JSON, min_size=1, max_size=2))
def test_the_unsorted_write_refuses_what_the_sorted_write_refuses(value: Any) -> None:
    # ``plain_parts`` vouches for the standard processors' types by an unsorted orjson
    # write (``_EXACT``): it must refuse exactly what the sorted one (``_OPTIONS``) refuses.
    def written(obj: Any, option: int) -> bool:
        try:
            orjson.dumps(obj, option=option)
        except TypeError:
            return False
        return True

    for obj in (
        value,
        {"v": value, "k": [value]},
        {"v": _Location(location="x")},
        {_Key("v"): 1, "a": 2},
        {"v": {"location": _Key("x")}},
    ):
        assert written(obj, _format3._EXACT) == written(obj, _format3._OPTIONS)


def test_the_standard_processors_are_remembered_within_their_bound() -> None:
    from statifier.core.planner import io_processors

    for number in range(_format3._STANDARD_LIMIT + 10):
        session_id = f"sess_{number}"
        assert _format3._standard_processors(session_id) == io_processors(session_id)
        assert _format3._standard_processors(session_id) is _format3._STANDARD[session_id]
        assert len(_format3._STANDARD) <= _format3._STANDARD_LIMIT


@pytest.mark.parametrize("session_id", ["sess_fast", 's "quoted" \u2603 \\ \U0001f600', "x"])
def test_the_plain_read_puts_back_the_processors_io_processors_makes(
    machine: Machine, session_id: str
) -> None:
    from statifier.core.planner import io_processors

    state, _ = statifier.initialize(machine, session_id=session_id)
    blob = dumps(state)
    shape_line, values_line = blobs.split(blob)[1].split(b"\n")
    plain = _format3._plain_read(shape_line, values_line, machine, None, None, DEFAULT_LIMITS)
    assert plain == state
    for loaded in (plain, loads(blob, machine)):
        assert loaded is not None
        processors = loaded.datamodel["_ioprocessors"]
        expected = io_processors(session_id)
        assert processors == expected
        assert list(processors) == list(expected)
        # One description under both names, as ``io_processors`` shares it.
        assert len({id(description) for description in processors.values()}) == 1


def test_a_shape_says_whether_its_states_hold_the_stored_datamodel(
    rich: Machine, ecma: Machine
) -> None:
    from statifier.datamodel.registry import state_variables

    for chart, states, types in (
        (rich, _rich_states(rich), WORKER),
        (ecma, _ecma_states(ecma), None),
    ):
        probe: dict[str, Any] = {}
        as_stored = state_variables(chart, probe) is probe
        for state in states:
            blob = dumps(state)
            shape_line, values_line = blobs.split(blob)[1].split(b"\n")
            shape = payloads.decode_shape(orjson.loads(shape_line), chart)
            assert shape.variables_as_stored is as_stored
            assert shape.unread == payloads.unread_length(shape.limits)
            plain = _format3._plain_read(
                shape_line, values_line, chart, types, None, DEFAULT_LIMITS
            )
            full = _format3._full_read(
                shape_line + b"\n" + values_line, chart, types, None, DEFAULT_LIMITS
            )
            assert plain == full == state
            assert plain is not None
            assert type(plain.datamodel) is type(full.datamodel)
            assert (type(plain.datamodel) is dict) is as_stored


def test_the_line_read_last_is_taken_only_whole(machine: Machine) -> None:
    # ``read_unkeyed`` takes the shape line it read last when the payload starts with it
    # and its newline; a payload that starts with it but goes on is read for what it is.
    state = _state(machine)
    blob = dumps(state)
    shape_line, values_line = blobs.split(blob)[1].split(b"\n")
    assert loads(blob, machine) == state
    assert machine._cache[_format3._LAST_SHAPE][0] == shape_line + b"\n"
    longer = _reframe(blob, shape_line + b" \n" + values_line)
    assert loads(longer, machine) == state  # the full read allows the space
    for broken in (shape_line + b"x\n" + values_line, shape_line + values_line):
        with pytest.raises(CorruptPosition):
            loads(_reframe(blob, broken), machine)
    assert loads(blob, machine) == state


_MUTATIONS = st.lists(
    st.tuples(
        st.sampled_from(["delete", "insert", "replace"]),
        st.integers(0, 10_000),
        st.sampled_from(list(b'\n"01}],{[x t-e:\\')),
    ),
    min_size=1,
    max_size=3,
)


@settings(max_examples=500, deadline=None)
@given(which=st.integers(0, 3), mutations=_MUTATIONS)
def test_loads_of_a_damaged_payload_says_what_the_full_read_says(
    rich: Machine, which: int, mutations: list[tuple[str, int, int]]
) -> None:
    # Payloads near one ``dumps`` wrote, under a right CRC, read after that one (its shape
    # line is the one read last): ``loads`` gives the state the full read gives, or
    # refuses with its message.
    state = _rich_states(rich)[which]
    blob = dumps(state)
    payload = bytearray(blobs.split(blob)[1])
    for kind, where, byte in mutations:
        at = where % (len(payload) + 1)
        if kind == "insert":
            payload[at:at] = bytes([byte])
        elif at < len(payload):
            payload[at : at + 1] = b"" if kind == "delete" else bytes([byte])
    damaged = _reframe(blob, bytes(payload))
    assert loads(blob, rich, invoke_types=WORKER) == state
    expected = _read_outcome(
        lambda: _format3._full_read(bytes(payload), rich, WORKER, None, DEFAULT_LIMITS)
    )
    found = _read_outcome(lambda: loads(damaged, rich, invoke_types=WORKER))
    assert found == expected


# -- what a load hands the next step -------------------------------------------------------


def test_a_plain_load_carries_its_values_line_s_bound_and_the_next_step_measures_nothing(
    machine: Machine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from statifier.core._run import Run

    blob = dumps(_state(machine))
    values_line = blobs.split(blob)[1].split(b"\n")[1]
    loaded = loads(blob, machine)
    assert loaded._datamodel_bound == (loaded.datamodel, payloads.TEXT_RATIO * len(values_line))
    measured: list[str | None] = []
    exact = Run.measure_datamodel

    def counted(run: Run, skip: str | None, limit: int | None) -> int:
        measured.append(skip)
        return exact(run, skip, limit)

    monkeypatch.setattr(Run, "measure_datamodel", counted)
    # A step that writes no variable hands the bound on; the next one writes within it.
    back, _ = statifier.handle_event(loaded, "go")
    assert back._datamodel_bound == (back.datamodel, loaded._datamodel_bound[1])
    stepped, _ = statifier.handle_event(back, "go")
    assert stepped.datamodel["n"] == 2
    assert measured == []
    # A state that carries no bound (a copy) is measured, once: the count can fail.
    statifier.handle_event(_replace(back), "go")
    assert measured == [None]


_AT_THE_CAP = """\
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python"
       initial="a">
  <datamodel><data id="xs" expr="[]"/><data id="t" expr="0"/></datamodel>
  <state id="a">
    <transition event="put" target="a"><assign location="t" expr="_event.data"/></transition>
  </state>
</scxml>
"""


def test_a_loaded_bound_at_the_cap_admits_and_refuses_the_writes_a_measured_one_does() -> None:
    # Floats count 24 for their 4 bytes of text (``0.5,``): the values line's length alone
    # would bound the variables far too low. At ``TEXT_RATIO`` times it, the carried bound
    # sits just under the cap, so the next write measures the variables exactly and is
    # admitted or refused at the very byte a state measured from scratch is.
    machine = statifier.compile(_AT_THE_CAP)
    cap = DEFAULT_LIMITS.datamodel_bytes
    assert cap is not None
    start, _ = statifier.initialize(machine, session_id="sess_cap")
    line = len(blobs.split(dumps(start))[1].split(b"\n")[1])
    count = (cap // payloads.TEXT_RATIO - line) // 4  # each float adds ``0.5,``
    floats = [0.5] * count
    measured = _replace(start, datamodel={**start.datamodel, "xs": floats})  # no bound
    loaded = loads(dumps(measured), machine)
    assert loaded._datamodel_bound is not None
    bound = loaded._datamodel_bound[1]
    size = measure(floats, cap)[0] + measure(0, cap)[0]
    assert size > cap // payloads.TEXT_RATIO  # the text's length alone is no bound
    assert size <= bound <= cap
    fits = cap - measure(floats, cap)[0] - len('""')  # ``t``'s new value quoted
    for length, admitted in ((fits, True), (fits + 1, False)):
        event = statifier.Event(name="put", data="y" * length)
        after_measure, produced = statifier.handle_event(measured, event)
        after_load, from_load = statifier.handle_event(loaded, event)
        assert from_load == produced
        assert after_load == after_measure
        refused = any(isinstance(e, statifier.effects.ErrorRaised) for e in produced)
        assert refused is not admitted, length


def test_two_loads_of_a_session_share_its_standard_processors(machine: Machine) -> None:
    # As every state of a session shares the ``_ioprocessors`` it started with; ``dumps``
    # knows the shared one by identity and still writes what the checked path writes.
    blob = dumps(_state(machine))
    first, second = loads(blob, machine), loads(blob, machine)
    shared = first.datamodel["_ioprocessors"]
    assert shared is second.datamodel["_ioprocessors"]
    assert shared is _format3._standard_processors("sess_fast")
    assert _format3.plain_body(first) == position._checked_body(first)
    assert dumps(first) == blob


def test_processors_that_are_none_are_kept_when_none_are_remembered(machine: Machine) -> None:
    # No remembered processors for the session and ``_ioprocessors`` None: nothing to know
    # by identity; the value is written as it is and read back as it was.
    state = _state(machine)
    odd = _replace(state, datamodel={**state.datamodel, "_ioprocessors": None})
    _format3._STANDARD.clear()
    plain = _format3.plain_body(odd)
    assert plain is not None
    assert plain == position._checked_body(odd)
    assert orjson.loads(plain.split(b"\n")[1])[10] is False  # ``standard_system_variables``
    assert loads(dumps(odd), machine) == odd
