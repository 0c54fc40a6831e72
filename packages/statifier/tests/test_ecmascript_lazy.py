"""An ECMAScript state's variables are written out of the engine only when something asks
(ADR 22): every state reads as it was when its call ended, whenever it is read, whichever
states were kept, read, dropped or resumed in between."""

from __future__ import annotations

import random

import pytest
import statifier
from statifier.core.position import dumps, loads
from statifier.core.state import MachineState
from statifier.datamodel import stored_variables

from engine_support.ecmascript import chart

CHART = chart(
    """
    <datamodel>
      <data id="n" expr="0"/><data id="o" expr="({a: {b: 1}, list: [1, 2]})"/>
      <data id="p" expr="o.a"/><data id="s" expr="'x'"/><data id="ev"/>
    </datamodel>
    <state id="s0">
      <transition event="count"><assign location="n" expr="n + 1"/></transition>
      <transition event="member"><assign location="o.a.b" expr="_event.data"/></transition>
      <transition event="index">
        <assign location="o.list[o.list.length]" expr="n"/><assign location="n" expr="n + 2"/>
      </transition>
      <transition event="computed"><assign location="o['k' + n % 3]" expr="n"/></transition>
      <transition event="keep"><assign location="ev" expr="_event.data"/></transition>
      <transition event="script"><script>n = n * 2; o.list.push(n); p.c = n</script></transition>
      <transition event="replace">
        <assign location="o" expr="({a: {b: n}, list: []})"/><assign location="p" expr="o.a"/>
      </transition>
      <transition event="loop">
        <foreach array="o.list" item="item" index="i">
          <assign location="s" expr="s + item"/>
        </foreach>
      </transition>
      <transition event="paren"><assign location="(s)" expr="s + '!'"/></transition>
      <transition event="shrink"><assign location="o.list.length" expr="1"/></transition>
      <transition event="drop"><script>delete o.a; delete globalThis.ev</script></transition>
    </state>
    """
)

EVENTS = (
    "count",
    "member",
    "index",
    "computed",
    "keep",
    "script",
    "replace",
    "loop",
    "paren",
    "shrink",
    "drop",
)


def event(rng: random.Random) -> statifier.Event:
    return statifier.Event(name=rng.choice(EVENTS), data={"v": rng.randrange(100)})


def eager(seed: int, steps: int) -> list[bytes]:
    """The position after each step, written out as soon as its call ends."""
    rng = random.Random(seed)  # noqa: S311 - a seeded sequence of events, not a secret
    state, _ = statifier.initialize(CHART, session_id="sess_lazy")
    blobs = [dumps(state)]
    for _ in range(steps):
        state, _ = statifier.handle_event(state, event(rng))
        blobs.append(dumps(state))
    return blobs


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("keep", [1, 3])
def test_every_state_reads_as_its_call_left_it(seed: int, keep: int) -> None:
    # Nothing is read while the run goes on; every ``keep``-th state is kept (the others
    # are dropped as soon as the next call is made), then read in a shuffled order.
    steps = 30
    expected = eager(seed, steps)
    rng = random.Random(seed)  # noqa: S311 - a seeded sequence of events, not a secret
    state, _ = statifier.initialize(CHART, session_id="sess_lazy")
    kept: dict[int, MachineState] = {0: state}
    for step in range(1, steps + 1):
        state, _ = statifier.handle_event(state, event(rng))
        if step % keep == 0:
            kept[step] = state
    kept[steps] = state
    order = list(kept)
    random.Random(seed + 100).shuffle(order)  # noqa: S311 - a seeded order
    for step in order:
        assert dumps(kept[step]) == expected[step], step


@pytest.mark.parametrize("seed", range(4))
def test_an_older_state_resumed_goes_on_as_it_was(seed: int) -> None:
    steps = 12
    expected = eager(seed, steps)
    rng = random.Random(seed)  # noqa: S311 - a seeded sequence of events, not a secret
    state, _ = statifier.initialize(CHART, session_id="sess_lazy")
    states = [state]
    for _ in range(steps):
        state, _ = statifier.handle_event(state, event(rng))
        states.append(state)
    # Each older state goes on with the same event as the run that wrote it out at once.
    for step in (steps - 1, steps // 2, 1, 0):
        probe = statifier.Event(name="script", data={"v": 1})
        branched, effects = statifier.handle_event(states[step], probe)
        reference, reference_effects = statifier.handle_event(loads(expected[step], CHART), probe)
        assert effects == reference_effects
        assert dumps(branched) == dumps(reference)
        assert dumps(states[step]) == expected[step]


def test_a_state_read_while_the_next_call_runs_reads_as_it_was() -> None:
    # A host function runs between the engine's calls, in the middle of a step: the state
    # the step resumed is still what it was.
    seen: list[object] = []
    holder: list[MachineState] = []

    def peek(x: int) -> int:
        seen.append(dict(holder[0].datamodel)["n"])
        return x

    machine = statifier.compile(
        '<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript">'
        '<datamodel><data id="n" expr="1"/></datamodel><state id="s">'
        '<transition event="go"><assign location="n" expr="n + 10"/>'
        '<assign location="n" expr="peek(n)"/></transition></state></scxml>',
        functions={"peek": peek},
    )
    state, _ = statifier.initialize(machine, session_id="sess_peek")
    holder.append(state)
    after, _ = statifier.handle_event(state, "go")
    assert seen
    assert all(value == 1 for value in seen)
    assert after.datamodel["n"] == 11
    assert state.datamodel["n"] == 1


def test_a_call_that_replaces_its_engine_keeps_the_state_it_resumed() -> None:
    # Running out of memory replaces the engine; the state the call resumed lived in the
    # old one alone.
    machine = chart(
        """
        <datamodel><data id="o" expr="({k: 1})"/></datamodel>
        <state id="s">
          <transition event="bump"><assign location="o.k" expr="o.k + 1"/></transition>
          <transition event="boom">
            <assign location="o.k" expr="o.k + 100"/>
            <assign location="o.big" expr="'x'.repeat(80 * 1024 * 1024)"/>
          </transition>
        </state>
        """
    )
    state, _ = statifier.initialize(machine, session_id="sess_boom")
    state, _ = statifier.handle_event(state, "bump")
    after, effects = statifier.handle_event(state, "boom")
    assert any(isinstance(e, statifier.core.effects.ErrorRaised) for e in effects)
    assert state.datamodel["o"] == {"k": 2}
    assert after.datamodel["o"] == {"k": 102}
    again, _ = statifier.handle_event(after, "bump")
    assert again.datamodel["o"] == {"k": 103}
    assert stored_variables(state.datamodel)["o"] == {"k": 2}


def test_a_call_whose_first_write_is_no_event_logs_it_too() -> None:
    # Cancelling runs the exit content at once: its first write is an assign, not _event.
    machine = chart(
        """
        <datamodel><data id="o" expr="({k: 1})"/><data id="n" expr="0"/></datamodel>
        <state id="s">
          <onexit><assign location="o.k" expr="o.k + 1"/><assign location="n" expr="9"/></onexit>
          <transition event="bump"><assign location="o.k" expr="o.k * 10"/></transition>
        </state>
        """
    )
    state, _ = statifier.initialize(machine, session_id="sess_cancel")
    state, _ = statifier.handle_event(state, "bump")
    cancelled, _ = statifier.cancel(state)
    assert (state.datamodel["o"], state.datamodel["n"]) == ({"k": 10}, 0)
    assert (cancelled.datamodel["o"], cancelled.datamodel["n"]) == ({"k": 11}, 9)


def test_an_event_no_step_gave_the_engine_reads_as_it_was() -> None:
    # An event that runs nothing in the engine (no condition, no content) never reaches it
    # during its step; a variable holding the previous event's data stays that data.
    machine = chart(
        """
        <datamodel><data id="ev"/></datamodel>
        <state id="s">
          <transition event="keep"><assign location="ev" expr="_event.data"/></transition>
          <transition event="idle"/>
          <transition event="look"><log expr="JSON.stringify([ev, _event.data])"/></transition>
        </state>
        """
    )
    state, _ = statifier.initialize(machine, session_id="sess_idle")
    kept, _ = statifier.handle_event(state, statifier.Event(name="keep", data={"a": 1}))
    idle, _ = statifier.handle_event(kept, statifier.Event(name="idle", data={"b": 2}))
    again, _ = statifier.handle_event(idle, statifier.Event(name="idle", data={"c": 3}))
    _, effects = statifier.handle_event(again, statifier.Event(name="look", data=4))
    assert [e.value for e in effects if isinstance(e, statifier.core.effects.Log)] == [
        '[{"a":1},4]'
    ]
    for step, expected in ((kept, {"a": 1}), (idle, {"b": 2}), (again, {"c": 3})):
        assert step.datamodel["ev"] == {"a": 1}
        assert step.datamodel["_event"]["data"] == expected
        assert loads(dumps(step), machine).datamodel["ev"] == {"a": 1}
    # Written out while the engine still waits for the event of the step that made it.
    fresh, _ = statifier.handle_event(kept, statifier.Event(name="idle", data={"d": 5}))
    assert stored_variables(fresh.datamodel)["ev"] == {"a": 1}


def test_a_step_that_only_moves_the_configuration_keeps_what_took_the_last_event() -> None:
    # Such steps are replayed from a memo for the Python datamodel; here a variable holds
    # the last event's data, which the next event makes data of its own.
    machine = chart(
        """
        <datamodel><data id="ev"/></datamodel>
        <state id="a">
          <transition event="keep"><assign location="ev" expr="_event.data"/></transition>
          <transition event="move" target="b"/>
        </state>
        <state id="b">
          <transition event="look"><log expr="JSON.stringify([ev, _event.data])"/></transition>
        </state>
        """
    )
    state, _ = statifier.initialize(machine, session_id="sess_replay")
    kept, _ = statifier.handle_event(state, statifier.Event(name="keep", data={"a": 1}))
    first, _ = statifier.handle_event(kept, statifier.Event(name="move", data=2))
    second, _ = statifier.handle_event(kept, statifier.Event(name="move", data=3))
    for moved in (first, second, loads(dumps(second), machine)):
        assert moved.datamodel["ev"] == {"a": 1}
        _, effects = statifier.handle_event(moved, statifier.Event(name="look", data=4))
        assert [e.value for e in effects if isinstance(e, statifier.core.effects.Log)] == [
            '[{"a":1},4]'
        ]
