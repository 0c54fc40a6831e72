"""Property: saving and reloading a position at any point changes nothing observable.

For a random chart and a random event sequence, run A drives the execution straight
through; run B stops after ``split`` events, writes the position with ``dumps``, reads it
back with ``loads`` and continues. Everything after the split must be identical.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import statifier
from hypothesis import given, settings
from hypothesis import strategies as st
from statifier import Event, MachineState, external, handle_event, initialize
from statifier.core import effects
from statifier.core.position import dumps, loads

from engine_support import chartgen

INVOKE_TYPES = frozenset({chartgen.INVOKE_TYPE})


@st.composite
def event_sequences(draw: st.DrawFn) -> list[Event]:
    """External events on the chart alphabet, some with data and a caller context."""
    events: list[Event] = []
    for position in range(draw(st.integers(0, 15))):
        name = draw(st.sampled_from(chartgen.EVENTS))
        data = draw(st.none() | chartgen.event_data())
        context: Any = draw(st.sampled_from([None, {"seq": position, "who": "h\u00f6st"}]))
        events.append(external(name, data=data, caller_context=context))
    return events


def _feed(state: MachineState, events: list[Event]) -> tuple[MachineState, list[effects.Effect]]:
    produced: list[effects.Effect] = []
    for event in events:
        if not state.running:
            break
        state, out = handle_event(state, event)
        produced.extend(out)
    return state, produced


@settings(max_examples=150, deadline=None)
@given(
    source=chartgen.charts(),
    events=event_sequences(),
    split_fraction=st.floats(0, 1),
    budget=st.sampled_from([4, 40]),
    trace=st.booleans(),
)
def test_dumps_loads_at_any_split_is_invisible(
    source: str, events: list[Event], split_fraction: float, budget: int, trace: bool
) -> None:
    machine = statifier.compile(source)
    split = round(split_fraction * len(events))

    def start() -> MachineState:
        state, _ = initialize(
            machine,
            session_id="sess_property",
            max_macrostep_rounds=budget,
            trace=trace,
            invoke_types=INVOKE_TYPES,
        )
        return state

    # Run A: straight through.
    state_a, _ = _feed(start(), events[:split])
    final_a, after_a = _feed(state_a, events[split:])

    # Run B: save and reload at the split.
    state_b, _ = _feed(start(), events[:split])
    blob = dumps(state_b)
    restored = loads(blob, machine, invoke_types=INVOKE_TYPES)
    assert restored == state_b
    assert dumps(restored) == blob
    final_b, after_b = _feed(restored, events[split:])

    assert len(after_b) == len(after_a)
    for effect_a, effect_b in zip(after_a, after_b, strict=True):
        assert effect_b == effect_a
    assert final_b == final_a
    assert dumps(final_b) == dumps(final_a)
    # Each payload line is exactly the canonical JSON text of what it holds: orjson's, or
    # the standard library's ASCII text where orjson cannot write the values.
    for line in blob.split(b"\n", 4)[4].split(b"\n"):
        value = json.loads(line)
        try:
            canonical = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except TypeError:
            text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
            canonical = text.encode("ascii")
        assert line == canonical
