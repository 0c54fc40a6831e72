"""A state's candidate transitions' conditions go to the ECMAScript engine in one call
(``KeptVariables.first_true``, ADR 22): which transition fires, the errors, the charges
and the positions are what evaluating each condition alone gives. Also the inline
admission of a new flat array: the datamodel cap still refuses it, and nothing changes."""

from __future__ import annotations

from typing import Any

import pytest
import statifier
from statifier.budget import NODE_COST, MacrostepLimits
from statifier.datamodel import stored_variables
from statifier.datamodel.ecmascript import _instance, charges, variables
from statifier.values import measure

from engine_support.ecmascript import MeteredStep, chart, errors, logged, metered_steps

# Each event's conditions: values whose truth differs between JavaScript and what Python
# reads of them (an empty array or object, the infinities, NaN), a failing condition, one
# that writes (it runs guarded, alone), In(), a function, and a transition without one.
GUARDS = """
<datamodel>
  <data id="n" expr="0"/><data id="hits" expr="0"/><data id="f" expr="(function () {})"/>
</datamodel>
<state id="s">
  <transition event="pick" cond="_event.data.v === 'empty array' ? [] : false">
    <log expr="'array'"/></transition>
  <transition event="pick" cond="_event.data.v === 'empty object' ? {} : 0">
    <log expr="'object'"/></transition>
  <transition event="pick" cond="_event.data.v === 'inf' ? 1 / 0 : ''">
    <log expr="'infinity'"/></transition>
  <transition event="pick" cond="_event.data.v === 'nan' ? 0 / 0 : null">
    <log expr="'nan'"/></transition>
  <transition event="pick" cond="_event.data.v === 'fail' ? nothere.x : undefined">
    <log expr="'failed'"/></transition>
  <transition event="pick" cond="_event.data.v === 'func' ? f : -0">
    <log expr="'function'"/></transition>
  <transition event="pick" cond="_event.data.v === 'write' &amp;&amp; (hits = hits + 1) &gt; 0">
    <log expr="'wrote ' + hits"/></transition>
  <transition event="pick" cond="_event.data.v === 'one' ? [1] : 0">
    <log expr="'non-empty array'"/></transition>
  <transition event="pick" cond="_event.data.v === 'text' &amp;&amp; In('s') ? 'yes' : ''">
    <log expr="'text'"/></transition>
  <transition event="pick" cond="_event.data.v === 'number' ? 0.5 : NaN">
    <log expr="'number'"/></transition>
  <transition event="pick" cond="_event.data.v.length &gt; 100"><log expr="'long'"/></transition>
  <transition event="pick"><log expr="'fallback ' + (n = n + 1)"/></transition>
</state>
"""

MACHINE = chart(GUARDS)

VALUES = [
    "empty array",
    "empty object",
    "inf",
    "nan",
    "fail",
    "func",
    "write",
    "one",
    "text",
    "number",
    "none",
    "x" * 101,
    "write",
]


def alone(
    self: variables.Variables,
    conditions: tuple[Any, ...],
    start: int,
    in_state: Any,
    budget: Any = None,
) -> tuple[int, Exception | None]:
    """``first_true`` the way the core evaluates each condition on its own."""
    for index in range(start, len(conditions)):
        condition = conditions[index]
        if condition is None:
            return index, None
        try:
            if condition.evaluate(self, in_state, budget):
                return index, None
        except Exception as exc:  # the core reports any failure
            return index, exc
    return len(conditions), None


def drive(limits: MacrostepLimits) -> list[MeteredStep]:
    """Every step of ``VALUES``: its effects, the position it ends in, the steps left."""
    return metered_steps(
        MACHINE,
        "sess_guards",
        [statifier.Event(name="pick", data={"v": value}) for value in VALUES],
        limits,
    )


@pytest.mark.parametrize(
    "limits",
    [
        MacrostepLimits(),
        # Enough steps for a few conditions, not all of them (a call costs 1,000).
        MacrostepLimits(steps=3_500),
        MacrostepLimits(steps=8_000),
        MacrostepLimits(output_bytes=1),
    ],
    ids=["defaults", "steps for three", "steps for seven", "one output byte"],
)
def test_conditions_in_one_call_give_what_each_gives_alone(
    limits: MacrostepLimits, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A clock that never moves: each call is charged exactly its fixed cost.
    monkeypatch.setattr(charges, "perf_counter_ns", lambda: 0)
    monkeypatch.setattr(variables, "perf_counter_ns", lambda: 0)
    together = drive(limits)
    monkeypatch.setattr(variables.Variables, "first_true", alone)
    one_by_one = drive(limits)
    assert [effects for effects, _, _ in together] == [effects for effects, _, _ in one_by_one]
    assert [blob for _, blob, _ in together] == [blob for _, blob, _ in one_by_one]
    assert [left for _, _, left in together] == [left for _, _, left in one_by_one]


def test_what_each_condition_picks() -> None:
    state, _ = statifier.initialize(MACHINE, session_id="sess_guards")
    picked = []
    for value in VALUES:
        state, effects = statifier.handle_event(
            state, statifier.Event(name="pick", data={"v": value})
        )
        picked.append((logged(effects), len(errors(effects))))
    assert picked == [
        (["fallback 1"], 0),  # [] reads as an empty list: false
        (["fallback 2"], 0),  # {} likewise
        (["fallback 3"], 0),  # Infinity reads as None
        (["fallback 4"], 0),  # NaN likewise
        (["fallback 5"], 1),  # the failing condition is false, and raises error.execution
        (["fallback 6"], 0),  # a function reads as None
        (["wrote 1"], 0),  # a condition that writes runs guarded, and keeps its write
        (["non-empty array"], 0),
        (["text"], 0),
        (["number"], 0),
        (["fallback 7"], 0),
        (["long"], 0),
        (["wrote 2"], 0),
    ]


def test_primitive_conditions_cost_one_call_an_event(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    made = _instance._Api.__init__

    def counting(api: Any, context: Any) -> None:
        # Each call into the engine that evaluates conditions, with or without the event.
        made(api, context)
        for name in ("raw_read_guards", "raw_read_guards_event"):
            function = getattr(api, name)

            def counted(*args: Any, function: Any = function) -> Any:
                calls.append(1)
                return function(*args)

            setattr(api, name, counted)

    monkeypatch.setattr(_instance._Api, "__init__", counting)
    evaluations: list[int] = []
    evaluate = variables.Variables.evaluate

    def evaluated(self: variables.Variables, *args: Any) -> Any:
        evaluations.append(1)
        return evaluate(self, *args)

    monkeypatch.setattr(variables.Variables, "evaluate", evaluated)
    machine = chart(
        """
        <datamodel><data id="count" expr="0"/></datamodel>
        <state id="s">
          <transition event="e" cond="_event.data.v &gt; 50 &amp;&amp; count &gt;= 0">
            <log expr="'big'"/></transition>
          <transition event="e" cond="_event.data.v === 7 ? 'seven' : ''">
            <log expr="'seven'"/></transition>
          <transition event="e" cond="_event.data.v &lt;= 50"><log expr="'small'"/></transition>
        </state>
        """
    )
    state, _ = statifier.initialize(machine, session_id="sess_guards")
    picked = []
    for value in (60, 7, 3):
        state, effects = statifier.handle_event(state, statifier.Event(name="e", data={"v": value}))
        picked.append(logged(effects))
    assert picked == [["big"], ["seven"], ["small"]]
    # Three events, each one call whichever condition holds; the only evaluations alone
    # are the three logs.
    assert (len(calls), len(evaluations)) == (3, 3)


ARRAYS = """
<datamodel><data id="lists" expr="({})"/><data id="i" expr="0"/></datamodel>
<state id="s">
  <transition event="add">
    <assign location="i" expr="i + 1"/>
    <assign location="lists['l' + i]"
            expr="[i, i + 1, i + 2, i + 3, 'four', 5.5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]"/>
  </transition>
</state>
"""


def test_new_flat_arrays_stay_within_the_cap() -> None:
    # Each event stores a new flat array (the inline admission) under a new key: the
    # bound grows with each, so the cap refuses one before the stored size passes it, and
    # a refused write changes nothing. Nothing reads the variables until the end (a
    # write-out would make the bound exact again at every event).
    cap = 2_000
    machine = chart(ARRAYS)
    state, _ = statifier.initialize(
        machine, session_id="sess_arrays", limits=MacrostepLimits(datamodel_bytes=cap)
    )
    refused = 0
    for _ in range(40):
        state, effects = statifier.handle_event(state, "add")
        refused += len(errors(effects))
    stored = stored_variables(state.datamodel)
    # What the cap counts (``check_datamodel``): each chart variable's measure.
    assert sum(measure(v, 10**9)[0] for k, v in stored.items() if k[0] != "_") <= cap
    assert refused > 0
    lists = state.datamodel["lists"]
    assert state.datamodel["i"] == 40
    assert len(lists) == 40 - refused
    assert lists["l1"] == [1, 2, 3, 4, "four", 5.5, *range(6, 16)]


def _steps_left(body: str, values: list[int]) -> list[int]:
    """The steps each ``pick`` of ``values`` leaves of its macrostep's budget (the first:
    what starting the chart left)."""
    events = [statifier.Event(name="pick", data={"v": value}) for value in values]
    steps = metered_steps(chart(body), "sess_charges", events, MacrostepLimits())
    return [left for _, _, left in steps]


def _picks(*values: int) -> str:
    """A state whose ``pick`` transitions each hold for one of ``values``, in turn."""
    transitions = "".join(
        f'<transition event="pick" cond="_event.data.v === {v}"><log expr="1"/></transition>'
        for v in values
    )
    return f'<state id="s">{transitions}</state>'


def test_a_chain_of_conditions_is_charged_as_each_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # A frozen clock: each condition's call is charged its fixed cost. The chain's three
    # conditions go to the engine in one call; the lone one through ``evaluate``.
    monkeypatch.setattr(charges, "perf_counter_ns", lambda: 0)
    monkeypatch.setattr(variables, "perf_counter_ns", lambda: 0)
    alone = _steps_left(_picks(1), [1, 9])
    chained = _steps_left(_picks(1, 2, 3), [1, 2, 3, 9])
    # The first holding costs what the lone condition costs; each one before it evaluated
    # adds a guard's NODE_COST and its share of the call, as when evaluated alone.
    each = NODE_COST + charges.CALL_COST
    assert chained[1] == alone[1]
    assert [chained[1] - left for left in chained[1:4]] == [0, each, 2 * each]
    # None holding: every condition evaluated, and no content run.
    assert alone[2] - chained[4] == 2 * each
