"""Event data of one entry goes to the ECMAScript engine as its key and value when the
binding carries both as they are (``variables._event_fields``), and the engine builds the
data object itself; any other data goes as JSON text, as all data did before (ADR 22).
The engine must hold the same ``_event`` either way: the same keys, values (``-0``, ints
past 32 bits), property attributes, prototype and frozenness, and the same refusals."""

from __future__ import annotations

from typing import Any

import pytest
import statifier
from hypothesis import given, settings
from hypothesis import strategies as st
from statifier.datamodel.base import EvaluationError
from statifier.datamodel.ecmascript import variables
from statifier.datamodel.ecmascript._instance import Instance, Setup
from statifier.datamodel.ecmascript.charges import NO_LIMIT
from statifier.datamodel.host import HostFunctions
from statifier.values import json_text

from engine_support.ecmascript import chart, logged

# Everything a chart can tell of ``_event``: each own key with its attributes and value
# (numbers by their text, -0 apart), each object's prototype and frozenness.
DESCRIBE = """JSON.stringify((function describe(value) {
  if (typeof value === "number") return ["number", Object.is(value, -0) ? "-0" : String(value)];
  if (value === null || typeof value !== "object") return [typeof value, String(value)];
  return ["object", Object.getPrototypeOf(value) === Object.prototype,
    Object.isFrozen(value), Object.isExtensible(value),
    Reflect.ownKeys(value).map((key) => {
      const found = Object.getOwnPropertyDescriptor(value, key);
      return [String(key), found.writable, found.enumerable, found.configurable,
        describe(found.value)];
    })];
})(_event))"""

FIELDS = ("e", "external", None, None, None, None)


def event_of(data: Any) -> dict[str, Any]:
    """The ``_event`` the core binds for an event carrying ``data``."""
    return {
        "name": "e",
        "type": "external",
        "sendid": None,
        "origin": None,
        "origintype": None,
        "invokeid": None,
        "data": data,
    }


def as_text(data: Any) -> tuple[Any, ...]:
    """``setEvent``'s arguments with the data as JSON text, as every event's were before."""
    return (*FIELDS, None, None if data is None else json_text(data))


@pytest.fixture(scope="module")
def engine() -> Instance:
    return Instance(Setup({}, HostFunctions()), NO_LIMIT)


def described(instance: Instance, pending: tuple[Any, ...]) -> str:
    """What the engine holds as ``_event`` once ``setEvent`` took ``pending``."""
    context = instance.context
    context.call(instance.api.set_event, True, *pending)
    function = instance.compiled("expression", DESCRIBE)
    text = context.call(instance.api.read, function, None, float(NO_LIMIT), False)
    assert isinstance(text, str)
    return text


# Text of any code points (lone surrogates, which the binding cannot carry, are rare in
# it: some are spelled out below).
TEXT = st.text(st.characters(exclude_categories=()), max_size=4)
STRING_KEYS = st.one_of(
    TEXT,
    st.sampled_from(["__proto__", "", "0", "4294967295", "-0", "toString", "$ref", "a\x00b"]),
    st.sampled_from(["\u00e9", "\U0001f600", "\ud800", "a\udc00"]),
)
KEYS = st.one_of(STRING_KEYS, st.integers(-3, 3), st.booleans(), st.none(), st.floats())
SCALARS = st.one_of(
    st.integers(),
    st.sampled_from([2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**53 + 1, 2**64]),
    st.floats(),
    st.sampled_from([-0.0, 0.0, 5.0, 1e16, 1e-7, 1.5, 2.0**31]),
    st.sampled_from([float("nan"), float("inf"), float("-inf")]),
    st.booleans(),
    st.none(),
    TEXT,
    st.sampled_from(["", "a\x00b", "\u00e9", "\U0001f600", "\ud800"]),
)
ONE_ENTRY = st.dictionaries(STRING_KEYS, SCALARS, min_size=1, max_size=1)
DATA = st.one_of(
    st.dictionaries(KEYS, SCALARS, min_size=1, max_size=1),
    st.dictionaries(KEYS, st.one_of(SCALARS, st.lists(SCALARS, max_size=2)), max_size=3),
    SCALARS,
)


def holds_what_its_json_text_builds(engine: Instance, data: Any) -> None:
    try:
        general = as_text(data)
    except (TypeError, ValueError, RecursionError):
        # Data that is no JSON is refused either way, with the error it always had.
        with pytest.raises(EvaluationError, match="the event's data is not a JSON value"):
            variables._event_fields(event_of(data))
        return
    pending = variables._event_fields(event_of(data))
    assert pending is not None
    assert pending[:6] == FIELDS
    assert described(engine, pending) == described(engine, general)


@settings(max_examples=1000, deadline=None)
@given(data=ONE_ENTRY)
def test_one_entry_holds_what_its_json_text_builds(engine: Instance, data: Any) -> None:
    holds_what_its_json_text_builds(engine, data)


@settings(max_examples=300, deadline=None)
@given(data=DATA)
def test_any_data_holds_what_its_json_text_builds(engine: Instance, data: Any) -> None:
    holds_what_its_json_text_builds(engine, data)


@pytest.mark.parametrize(
    ("data", "entry"),
    [
        ({"amount": 37}, True),
        ({"k": -(2**31)}, True),
        ({"k": 2**31 - 1}, True),
        ({"k": 2**31}, False),  # the binding would wrap it into 32 bits
        ({"k": -(2**31) - 1}, False),
        ({"k": -0.0}, True),
        ({"k": float("inf")}, False),  # refused, by the JSON text's writer
        ({"k": True}, True),
        ({"k": None}, True),
        ({"k": "text"}, True),
        ({"k": "\u00e9"}, False),
        ({"k": "a\x00b"}, False),
        ({"k": "\ud800"}, False),  # the binding cannot carry a lone surrogate
        ({"\ud800": 1}, False),
        ({"__proto__": 1}, True),
        ({"\u00e9": 1}, False),
        ({1: 1}, False),
        ({"k": [1]}, False),
        ({"a": 1, "b": 2}, False),
    ],
)
def test_which_data_goes_as_its_entry(engine: Instance, data: Any, entry: bool) -> None:
    # The property test above compares the engine's ``_event`` whichever way the data
    # goes: this one holds that the entry is taken where it can be, and only there.
    try:
        pending = variables._event_fields(event_of(data))
    except EvaluationError:
        assert not entry
        return
    assert pending is not None
    if entry:
        ((key, value),) = data.items()
        assert pending[6:] == (key, value)
        assert type(pending[7]) is type(value)
    else:
        assert pending[6] is None
        assert pending[7] == json_text(data)
    assert described(engine, pending) == described(engine, as_text(data))


WRITES = chart(
    """
    <datamodel><data id="kept"/><data id="seen" expr="[]"/></datamodel>
    <state id="s">
      <transition event="e">
        <assign location="kept" expr="_event.data"/>
        <assign location="seen" expr="seen.concat([_event.data.k])"/>
        <log expr="JSON.stringify(
          [Object.isFrozen(_event.data), _event.data.k, kept === _event.data])"/>
        <script>
          try { (function () { "use strict"; _event.data.k = 0; })(); }
          catch (error) { seen.push(error.name); }
        </script>
      </transition>
    </state>
    """
)


def test_a_run_reads_and_keeps_the_entry_as_its_json_text_gave_it() -> None:
    state, _ = statifier.initialize(WRITES, session_id="sess_entry")
    for value in (2**31 - 1, 2**31, -0.0, "x", True, None):
        state, effects = statifier.handle_event(state, statifier.Event(name="e", data={"k": value}))
        assert logged(effects) == [f"[true,{_js(value)},true]"]
    assert state.datamodel["kept"] == {"k": None}
    assert state.datamodel["seen"] == [
        2**31 - 1,
        "TypeError",
        2**31,
        "TypeError",
        0,
        "TypeError",
        "x",
        "TypeError",
        True,
        "TypeError",
        None,
        "TypeError",
    ]


def _js(value: Any) -> str:
    """``JSON.stringify`` of a scalar (``-0`` is ``0``)."""
    return "0" if value == 0 and type(value) is float else json_text(value)
