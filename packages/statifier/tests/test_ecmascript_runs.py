"""A run of ``<assign>`` (and a ``<log>`` ending it) goes to the ECMAScript engine in one
call (ADR 22): every effect, error, charge and position is what the nodes give one at a
time, wherever the run stops or fails."""

from __future__ import annotations

from typing import Any

import pytest
import statifier
from statifier.budget import MacrostepLimits
from statifier.core import content
from statifier.core import effects as fx
from statifier.core.position import dumps, loads
from statifier.datamodel.ecmascript import charges, variables

from engine_support.ecmascript import MeteredStep, chart, logged, metered_steps

RUN = """
<datamodel>
  <data id="count" expr="0"/><data id="total" expr="0"/><data id="recent" expr="[]"/>
  <data id="account" expr="({id: 'a', last: 0})"/><data id="f"/><data id="gone"/>
</datamodel>
<state id="open">
  <transition event="charge">
    <assign location="count" expr="count + 1"/>
    <assign location="total" expr="total + _event.data.amount"/>
    <assign location="recent" expr="recent.concat([_event.data.amount]).slice(-3)"/>
    <assign location="account.last" expr="_event.data.amount"/>
    <log label="total" expr="In('open') ? total : -1"/>
  </transition>
  <transition event="fail">
    <assign location="count" expr="count + 1"/>
    <assign location="gone.x" expr="1"/>
    <assign location="total" expr="-1"/>
  </transition>
  <transition event="undeclared">
    <assign location="count" expr="count + 1"/>
    <assign location="nothere" expr="1"/>
    <assign location="total" expr="-1"/>
  </transition>
  <transition event="big">
    <assign location="count" expr="count + 1"/>
    <assign location="recent" expr="'x'.repeat(_event.data.size)"/>
    <assign location="total" expr="-1"/>
  </transition>
  <transition event="arm">
    <script>f = {valueOf: function () { count = 100; return 1 }}</script>
  </transition>
  <transition event="implicit">
    <assign location="count" expr="count + 1"/>
    <assign location="total" expr="f &gt; 0 ? 5 : 6"/>
    <assign location="account.last" expr="count"/>
    <log expr="count"/>
  </transition>
  <transition event="loud">
    <assign location="count" expr="count + 1"/>
    <log expr="'y'.repeat(_event.data.size)"/>
  </transition>
  <transition event="broken">
    <assign location="count" expr="count + 1"/>
    <log expr="gone.x"/>
  </transition>
  <transition event="again">
    <assign location="count" expr="count + 1"/><log expr="count"/>
    <assign location="total" expr="total + 1"/><assign location="total" expr="total + 1"/>
    <raise event="inner"/>
    <assign location="count" expr="count + 1"/><assign location="count" expr="count + 1"/>
  </transition>
</state>
"""

MACHINE = chart(RUN)

EVENTS: list[tuple[str, Any]] = [
    ("charge", {"amount": 7}),
    ("charge", {"amount": 60}),
    ("fail", None),
    ("undeclared", None),
    ("big", {"size": 10}),
    ("big", {"size": 3000}),
    ("loud", {"size": 10}),
    ("loud", {"size": 5000}),
    ("broken", None),
    ("again", None),
    ("arm", None),
    ("implicit", None),
    ("charge", {"amount": 9}),
]


def one_at_a_time(_machine: Any, nodes: tuple[Any, ...]) -> tuple[None, ...]:
    return (None,) * len(nodes)


def drive(limits: MacrostepLimits) -> list[MeteredStep]:
    """Every step of ``EVENTS``: its effects, the position it ends in and the steps of its
    budget left."""
    return metered_steps(
        MACHINE,
        "sess_runs",
        [statifier.Event(name=name, data=data) for name, data in EVENTS],
        limits,
    )


@pytest.mark.parametrize(
    "limits",
    [
        MacrostepLimits(),
        MacrostepLimits(datamodel_bytes=2000, output_bytes=4000),
        # Enough steps for some of a run, not all of it (a node costs 20, a call 1,000).
        MacrostepLimits(steps=3_100),
        MacrostepLimits(steps=4_080),
        MacrostepLimits(effects=3),
    ],
    ids=["defaults", "small caps", "steps mid-run", "steps at a node", "effects"],
)
def test_a_run_in_one_call_gives_what_its_nodes_give_alone(
    limits: MacrostepLimits, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Calls are charged for their time past 0.5 ms too, which a loaded machine makes
    # vary: a clock that never moves charges each exactly its fixed cost.
    monkeypatch.setattr(charges, "perf_counter_ns", lambda: 0)
    monkeypatch.setattr(variables, "perf_counter_ns", lambda: 0)
    together = drive(limits)
    # Runs, compiled blocks and microstep plans are made afresh (a plan holds its
    # transition's run).
    MACHINE._cache.clear()
    monkeypatch.setattr(content, "kept_runs", one_at_a_time)
    alone = drive(limits)
    assert [effects for effects, _, _ in together] == [effects for effects, _, _ in alone]
    assert [blob for _, blob, _ in together] == [blob for _, blob, _ in alone]
    assert [left for _, _, left in together] == [left for _, _, left in alone]


def test_the_runs_of_a_block() -> None:
    (block,) = [t.content for t in MACHINE.transitions if t.events == ("again",)]
    runs = content.kept_runs(MACHINE, block)
    # An assign and the log ending its run; two assigns; a raise; two assigns. A run has
    # two nodes at least, and each of its suffixes is one (a run stopped part-way goes on).
    assert [None if run is None else len(run.nodes) for run in runs] == [
        2, None, 2, None, None, 2, None,
    ]  # fmt: skip
    assert content.kept_runs(MACHINE, block) is runs


ODD = chart(
    """
    <datamodel>
      <data id="a" expr="1"/><data id="b" expr="2"/><data id="c" expr="3"/>
      <data id="o" expr="({n: 4})"/>
    </datamodel>
    <state id="s">
      <transition event="odd">
        <assign location="a" expr="0 / 0"/>
        <assign location="b" expr="-0"/>
        <assign location="c" expr="-1 / 0"/>
        <assign location="o.n" expr="1 / 0"/>
      </transition>
      <transition event="read">
        <log expr="[Number.isNaN(a), Object.is(b, -0), c === -Infinity, o.n === Infinity]"/>
      </transition>
    </state>
    """
)


def test_a_runs_numbers_json_cannot_say_are_written_out_with_their_tags() -> None:
    # Written out once (each variable plain: JSON.stringify writes it), then a run makes
    # each a number JSON.stringify would write as null or 0: the variables it wrote are
    # written out again with the stored form's tags, and read back as they were.
    state, _ = statifier.initialize(ODD, session_id="sess_odd")
    dumps(state)
    state, effects = statifier.handle_event(state, statifier.Event(name="odd"))
    assert [type(e) for e in effects].count(fx.DatamodelChange) == 4
    resumed = loads(dumps(state), ODD)
    _, effects = statifier.handle_event(resumed, statifier.Event(name="read"))
    assert logged(effects) == [[True, True, True, True]]


SHARED = chart(
    """
    <datamodel><data id="a"/><data id="b"/><data id="n" expr="0"/></datamodel>
    <state id="s">
      <transition event="make">
        <assign location="a" expr="[1, 2]"/><assign location="n" expr="n + 1"/>
      </transition>
      <transition event="share">
        <assign location="b" expr="a"/><assign location="n" expr="n + 1"/>
      </transition>
      <transition event="read"><log expr="[a === b, b.length]"/></transition>
    </state>
    """
)


def test_a_new_list_a_run_wrote_is_one_object_with_what_takes_it_next() -> None:
    # The run admits the new list inline and keeps it among the objects the engine knows:
    # the next run's ``b = a`` must find it there, or ``a`` and ``b`` would be written out
    # (nothing was written out in between) as two lists alike, and read back as two.
    state, _ = statifier.initialize(SHARED, session_id="sess_shared")
    state, _ = statifier.handle_event(state, statifier.Event(name="make"))
    state, _ = statifier.handle_event(state, statifier.Event(name="share"))
    resumed = loads(dumps(state), SHARED)
    _, effects = statifier.handle_event(resumed, statifier.Event(name="read"))
    assert logged(effects) == [[True, 2]]
