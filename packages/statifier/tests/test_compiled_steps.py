"""The compiled paths of the core (ADR 20, issue 25) give exactly what the general ones give.

A block of executable content runs node by node through steps compiled per block (an
``<assign>`` of an expression is one closure), and a microstep of one transition follows a
plan made once per configuration and transition. Each comparison drives the same events
twice: once as compiled, once with every node through its general executor and every
microstep through ``exitStates``, ``executeTransitionContent`` and ``enterStates``.
States, effects (``BudgetExhausted`` and the errors of a budget running out included) and
position bytes must agree, so every step charge of a macrostep (ADR 11) stays as it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import pytest
import statifier
from hypothesis import given, settings
from hypothesis import strategies as st
from statifier import Event, MachineState, external, handle_event, initialize
from statifier.budget import MacrostepLimits
from statifier.chart import model
from statifier.core import _replay, algorithm, content, effects
from statifier.core._run import SMALL_INT, SMALL_SCALAR_SIZE
from statifier.core.algorithm import Interpreter
from statifier.core.position import dumps
from statifier.values import entry_key_size

from engine_support import chartgen

Step = tuple[MachineState, list[effects.Effect]]


def _always(executor: Any) -> Any:
    return lambda node, kept: executor


GENERAL_STEPS: dict[type, Any] = {
    node_type: _always(executor)
    for node_type, executor in (
        (model.RaiseNode, content.ContentExecutor.exec_raise),
        (model.LogNode, content.ContentExecutor.exec_log),
        (model.AssignNode, content.ContentExecutor.exec_assign),
        (model.IfNode, content.ContentExecutor.exec_if),
        (model.ForeachNode, content.ContentExecutor.exec_foreach),
        (model.ScriptNode, content.ContentExecutor.exec_script),
        (model.SendNode, content.ContentExecutor.exec_send),
        (model.CancelNode, content.ContentExecutor.exec_cancel),
    )
}


@contextmanager
def _general() -> Iterator[None]:
    """Every node through its general executor, every microstep without a plan, every
    expression through ``Expression.evaluate`` (no direct runs or guards), every round
    through ``main_event_loop``."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(content, "_STEPS", GENERAL_STEPS)
        patch.setattr(content, "direct_of", lambda machine: None)
        patch.setattr(algorithm, "direct_of", lambda machine: None)
        patch.setattr(Interpreter, "plan", lambda self, t: None)
        patch.setattr(algorithm, "QUIET_ROUNDS", False)
        yield


Meters = list[tuple[Any, ...]]


def _drive(
    machine: statifier.Machine, events: list[Event], **options: Any
) -> tuple[list[Step], Meters]:
    """Each call's state and effects, and what each call left of its budgets (steps and
    output bytes remaining, the reason it ran out, the datamodel's size bound, the element
    last run): every charge, even one no effect shows."""
    machine._cache.clear()  # compiled blocks, plans and replays are made afresh
    meters: Meters = []
    freeze = Interpreter.freeze

    def metered(run: Interpreter) -> MachineState:
        budget = run.budget
        meters.append((budget.steps, budget.output, budget.exhausted, run.bound, run.line))
        return freeze(run)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Interpreter, "freeze", metered)
        state, produced = initialize(machine, session_id="sess_compiled", **options)
        steps: list[Step] = [(state, produced)]
        for event in events:
            if not state.running:
                break
            machine._cache.pop(_replay.STEPS, None)
            state, produced = handle_event(state, event)
            steps.append((state, produced))
    return steps, meters


def _assert_same(driven: tuple[list[Step], Meters], drove: tuple[list[Step], Meters]) -> None:
    (general, general_meters), (compiled, compiled_meters) = driven, drove
    assert compiled_meters == general_meters
    assert len(compiled) == len(general)
    for (state_a, out_a), (state_b, out_b) in zip(general, compiled, strict=True):
        assert out_b == out_a
        assert state_b == state_a
        assert state_b.entered == state_a.entered
        assert dumps(state_b) == dumps(state_a)


_LIMITS = st.sampled_from(
    [
        MacrostepLimits(),
        MacrostepLimits(steps=60),
        MacrostepLimits(steps=130),
        MacrostepLimits(steps=400),
        MacrostepLimits(effects=3),
        MacrostepLimits(internal_events=2),
        MacrostepLimits(datamodel_bytes=60),
        MacrostepLimits(output_bytes=20),
    ]
)


@settings(max_examples=200, deadline=None)
@given(
    source=chartgen.charts(),
    names=st.lists(st.sampled_from(chartgen.EVENTS), max_size=12),
    limits=_LIMITS,
    trace=st.booleans(),
)
def test_generated_charts_run_alike_compiled_and_general(
    source: str,
    names: list[str],
    limits: MacrostepLimits,
    trace: bool,
) -> None:
    machine = statifier.compile(source)
    events = [external(name, data=i if i % 3 else None) for i, name in enumerate(names)]
    options = {
        "limits": limits,
        "trace": trace,
        "max_macrostep_rounds": 40,
        "invoke_types": {chartgen.INVOKE_TYPE},
    }
    with _general():
        general = _drive(machine, events, **options)
    _assert_same(general, _drive(machine, events, **options))


DATAMODEL = """\
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python">
  <datamodel>
    <data id="count" expr="0"/>
    <data id="total" expr="0"/>
    <data id="recent" expr="[]"/>
    <data id="account" expr="{'id': 'acc_1', 'last': 0}"/>
  </datamodel>
  <state id="open">
    <onexit><log label="out" expr="count"/></onexit>
    <transition event="charge" cond="_event.data['amount'] &gt; 50 and count &gt;= 0"
                target="open">
      <assign location="count" expr="count + 1"/>
      <assign location="total" expr="total + _event.data.amount * 2"/>
      <assign location="recent" expr="(recent + [_event.data['amount']])[-10:]"/>
      <assign location="account.last" expr="_event.data.amount"/>
      <log label="big" expr="total"/>
    </transition>
    <transition event="charge" cond="_event.data['amount'] &lt;= 50" target="open">
      <assign location="count" expr="count + 1"/>
      <assign location="total" expr="total + _event.data.amount"/>
      <assign location="recent" expr="(recent + [_event.data['amount']])[-10:]"/>
      <assign location="account.last" expr="_event.data.amount"/>
    </transition>
    <transition event="close" cond="count &gt; 3" target="closed"/>
    <transition event="odd" target="open">
      <assign location="_name" expr="1"/>
    </transition>
    <transition event="wrong" target="open">
      <assign location="missing" expr="1"/>
      <assign location="count" expr="count + 'x'"/>
    </transition>
    <transition event="mixed" cond="In('open') and _event.data['amount'] != 7" target="open">
      <assign location="account['last']" expr="_event.data['amount']"/>
      <assign location="account['la' + 'st']" expr="[count, total]"/>
      <log label="long" expr="'x' * (total % 300)"/>
      <assign location="recent" expr="[n + 1 for n in recent]"/>
      <raise event="again"/>
      <assign location="total" expr="total - 1"/>
    </transition>
    <transition event="again" cond="total % 2 == 0" target="open">
      <log label="again" expr="account"/>
      <assign location="account" expr="{'id': 'acc_2'}"/>
    </transition>
  </state>
  <final id="closed"/>
</scxml>
"""

_AMOUNTS = st.one_of(
    st.integers(-5, 120), st.just(2**70), st.text(max_size=3), st.none(), st.just([1, 2])
)


@settings(max_examples=150, deadline=None)
@given(
    events=st.lists(
        st.tuples(
            st.sampled_from(["charge", "charge", "close", "odd", "wrong", "mixed"]), _AMOUNTS
        ),
        max_size=10,
    ),
    limits=_LIMITS,
    trace=st.booleans(),
)
def test_the_datamodel_chart_runs_alike_compiled_and_general(
    events: list[tuple[str, Any]],
    limits: MacrostepLimits,
    trace: bool,
) -> None:
    machine = statifier.compile(DATAMODEL)
    fed = [Event(name=name, data={"amount": amount}) for name, amount in events]
    with _general():
        general = _drive(machine, fed, limits=limits, trace=trace)
    _assert_same(general, _drive(machine, fed, limits=limits, trace=trace))


def test_the_compiled_paths_are_taken() -> None:
    machine = statifier.compile(DATAMODEL)
    state, _ = initialize(machine, session_id="sess_taken")
    state, _ = handle_event(state, Event(name="charge", data={"amount": 70}))
    blocks = machine._cache["blocks"]
    assert any(step.__name__ == "assign" for _, steps, _ in blocks.values() for _, step in steps)
    assert any(isinstance(key, tuple) and key[0] == "plan" for key in machine._cache)
    # Whole blocks run directly, and the guards are evaluated so.
    directs = [direct for _, _, direct in blocks.values() if direct is not None]
    assert [len(direct.ops) for direct in directs] == [5]  # not the one-node onexit
    guards = machine._cache["direct guards"]
    assert all(code is not None for _, _, pairs, _ in guards.values() for _, code in pairs[:2])


_IN_DURING_MICROSTEP = """<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0"
    datamodel="python" initial="a">
  <state id="a" initial="a1">
    <onexit><log label="exit a" expr="[In('a'), In('a1'), In('a2'), In('b'), In('b1')]"/></onexit>
    <state id="a1">
      <onexit><log label="exit a1" expr="[In('a'), In('a1'), In('b'), In('b1')]"/></onexit>
      <transition event="go" target="b1">
        <log label="content" expr="[In('a'), In('a1'), In('b'), In('b1')]"/>
      </transition>
      <transition event="self" target="a1">
        <log label="self" expr="[In('a'), In('a1'), In('a2')]"/>
      </transition>
      <transition event="side" target="a2"/>
    </state>
    <state id="a2">
      <onentry><log label="enter a2" expr="[In('a'), In('a1'), In('a2')]"/></onentry>
      <transition event="go" target="b"/>
    </state>
  </state>
  <state id="b" initial="b2">
    <onentry><log label="enter b" expr="[In('a'), In('b'), In('b1'), In('b2')]"/></onentry>
    <state id="b1">
      <onentry><log label="enter b1" expr="[In('a'), In('b'), In('b1'), In('b2')]"/></onentry>
      <transition event="back" target="a"/>
    </state>
    <state id="b2">
      <onentry><log label="enter b2" expr="[In('b'), In('b1'), In('b2')]"/></onentry>
      <transition event="back" target="a2"/>
    </state>
  </state>
</scxml>
"""


@settings(max_examples=60, deadline=None)
@given(names=st.lists(st.sampled_from(["go", "self", "side", "back"]), max_size=10))
def test_a_planned_microstep_shows_the_configuration_state_by_state(names: list[str]) -> None:
    """A plan carries the configuration after each state it exits or enters (``follow``
    assigns them instead of changing a set): ``In()`` in ``<onexit>``, the transition's
    content and ``<onentry>`` must see exactly what the general functions show."""
    machine = statifier.compile(_IN_DURING_MICROSTEP)
    fed = [Event(name=name) for name in names]
    with _general():
        general = _drive(machine, fed)
    _assert_same(general, _drive(machine, fed))


def test_in_during_a_planned_microstep() -> None:
    """The configuration state by state on one path, spelled out (the plan is taken)."""
    machine = statifier.compile(_IN_DURING_MICROSTEP)
    state, _ = initialize(machine, session_id="sess_in")
    logged: list[tuple[str | None, Any]] = []
    for name in ["go", "back", "go"]:
        state, produced = handle_event(state, Event(name=name))
        logged += [(e.label, e.value) for e in produced if isinstance(e, effects.Log)]
    assert any(isinstance(key, tuple) and key[0] == "plan" for key in machine._cache)
    once = [
        ("exit a1", [True, True, False, False]),
        ("exit a", [True, False, False, False, False]),
        ("content", [False, False, False, False]),
        ("enter b", [False, True, False, False]),
        ("enter b1", [False, True, True, False]),
    ]
    assert logged == once + once  # b1 back to a logs nothing


_SMALL_WRITES = """<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python">
  <datamodel>
    <data id="count" expr="0"/>
    <data id="account" expr="{'last': 0}"/>
  </datamodel>
  <state id="open">
    <transition event="write" target="open">
      <assign location="LOCATION" expr="VALUE"/>
      <log label="after" expr="'x'"/>
    </transition>
  </state>
</scxml>
"""


def _bound_after(location: str, room: int, path: str, value: int = 7) -> tuple[int, int]:
    """The datamodel's size bound when a call starts and after it wrote ``value`` to
    ``location``, the datamodel cap ``room`` above the bound it started from: by a direct
    run (``path`` "direct"), by the node's compiled step (the node alone: "step") or by
    the general executor ("general")."""
    source = _SMALL_WRITES.replace("LOCATION", location).replace("VALUE", str(value))
    if path == "step":
        source = source.replace("""<log label="after" expr="'x'"/>""", "")
    machine = statifier.compile(source)
    start, _ = initialize(machine, session_id="sess_bound")
    assert start._datamodel_bound is not None
    before = start._datamodel_bound[1]
    limits = MacrostepLimits(datamodel_bytes=before + room)
    with _general() if path == "general" else nullcontext():
        machine._cache.clear()
        state, _ = initialize(machine, session_id="sess_bound", limits=limits)
        assert state._datamodel_bound == start._datamodel_bound
        state, produced = handle_event(state, "write")
    assert not any(isinstance(effect, effects.ErrorRaised) for effect in produced)
    # The write went the way asked: a direct run of the block, or the node's own step.
    blocks = machine._cache.get("blocks", {})
    directs = [direct for _, _, direct in blocks.values() if direct is not None]
    steps = [step.__name__ for _, compiled, _ in blocks.values() for _, step in compiled]
    assert (len(directs), steps) == {
        "direct": (1, ["assign" if location == "count" else "assign_into", "exec_log"]),
        "step": (0, ["assign" if location == "count" else "assign_into"]),
        "general": (0, ["exec_assign", "exec_log"]),
    }[path]
    assert state._datamodel_bound is not None
    return before, state._datamodel_bound[1]


@pytest.mark.parametrize("path", ["direct", "step", "general"])
@pytest.mark.parametrize(
    ("location", "growth"),
    [("count", 22), ("account.last", 22 + 4 + len('"last"'))],
    ids=["variable", "key"],
)
def test_a_small_write_is_bounded_without_measuring_while_it_fits(
    location: str, growth: int, path: str
) -> None:
    # ``SMALL_SCALAR_SIZE`` (22), and for a spelled-out key what a new entry adds.
    assert growth == SMALL_SCALAR_SIZE + (0 if location == "count" else entry_key_size("last"))
    # With just that room left, a small int adds it unmeasured: the cap is reached.
    before, after = _bound_after(location, growth, path)
    assert after == before + growth
    # One less, and the value is measured: ``7`` counts 2 (a key counts as before).
    before, after = _bound_after(location, growth - 1, path)
    assert after == before + growth - SMALL_SCALAR_SIZE + 2


@pytest.mark.parametrize("path", ["direct", "step", "general"])
@pytest.mark.parametrize("location", ["count", "account.last"])
def test_a_small_int_is_one_within_a_digit(location: str, path: str) -> None:
    # Ints within one CPython digit are small scalars (``SMALL_SCALAR_SIZE``, unmeasured);
    # from ``SMALL_INT`` on they are measured: 30 bits count (30 * 77 >> 8) + 2 = 11.
    largest = SMALL_INT - 1
    assert largest == 2**30 - 2
    key = 0 if location == "count" else entry_key_size("last")
    for value, counted in (
        (largest, SMALL_SCALAR_SIZE),
        (-largest, SMALL_SCALAR_SIZE),
        (largest + 1, 11),
        (-largest - 1, 11),
    ):
        before, after = _bound_after(location, 1000, path, value)
        assert after - before - key == counted, value
