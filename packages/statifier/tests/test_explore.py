"""``statifier.testing.explore``: every reachable position within a bound, and what it found."""

from __future__ import annotations

from pathlib import Path

import pytest
import statifier
from statifier.testing import UnexpectedChartError, explore, start

ROOT = Path(__file__).resolve().parents[3]
NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python"'


def chart(body: str, **attributes: str) -> statifier.Machine:
    extra = " ".join(f'{key}="{value}"' for key, value in attributes.items())
    return statifier.compile(f"<scxml {NS} {extra}>{body}</scxml>")


def test_the_card_chart_is_explored_completely() -> None:
    machine = statifier.compile((ROOT / "examples" / "card_authorization.scxml").read_text())
    assert explore(machine).lines() == [
        "card_authorization: explored 8 positions (all reachable ones); events sent: "
        "authorization.expired, capture.failed, capture.requested, capture.succeeded",
        "  every state was reached",
        "  every final state was reached",
        "  no action raised an error",
    ]


def test_states_nothing_leads_to_are_reported() -> None:
    machine = chart(
        """<state id="a"><transition event="go" target="b"/></state>
        <state id="b"><transition event="finish" target="done"/></state>
        <state id="island"><transition event="leave" target="lost"/></state>
        <final id="done"/>
        <final id="lost"/>""",
        name="islands",
        initial="a",
    )
    found = explore(machine)
    assert found.complete
    assert found.events == ("finish", "go", "leave")
    assert found.unreached == ("island", "lost")
    assert found.finals_unreached == ("lost",)
    assert found.lines()[1:3] == [
        "  never reached: island, lost",
        "  final states never reached: lost",
    ]


COUNTER = chart(
    """<datamodel><data id="n" expr="0"/></datamodel>
    <state id="counting">
      <transition event="inc" cond="n &lt; 3"><assign location="n" expr="n + 1"/></transition>
      <transition event="inc" target="big"/>
    </state>
    <final id="big"/>""",
    name="counter",
    initial="counting",
)


def test_guards_are_judged_on_the_values_the_path_made() -> None:
    found = explore(COUNTER)
    assert found.complete
    assert found.unreached == ()
    assert found.positions == 5  # n = 0, 1, 2, 3, then big


def test_the_bound_stops_the_search_and_says_so() -> None:
    found = explore(COUNTER, max_states=3)
    assert not found.complete
    assert found.positions == 3
    assert found.unreached == ("big",)
    assert found.lines()[0] == (
        "counter: explored 3 positions (stopped at the bound: more positions are reachable); "
        "events sent: inc"
    )
    assert explore(COUNTER, max_states=5).complete
    assert not explore(COUNTER, max_states=4).complete


PAYMENT = chart(
    """<datamodel><data id="paid" expr="0"/></datamodel>
    <state id="open">
      <transition event="pay" cond="_event.data['amount'] &gt;= 10" target="paid">
        <assign location="paid" expr="_event.data['amount']"/>
      </transition>
      <transition event="pay" target="refused"/>
    </state>
    <final id="paid"/>
    <final id="refused"/>""",
    name="payment",
    initial="open",
)


def test_an_error_is_reported_with_the_shortest_path_that_raises_it() -> None:
    found = explore(PAYMENT)
    (error,) = found.errors
    assert (error.states, error.action, error.error, error.line, error.path) == (
        ("open",),
        "send pay",
        "error.execution",
        3,
        ("send pay",),
    )
    assert found.unreached == ("paid",)  # a guard that failed is false: never paid
    assert found.lines()[3:] == [
        "  error.execution at line 3: send pay in (open): " + error.message,
        "    path: send pay",
    ]
    # The path replays.
    (action,) = error.path
    with pytest.raises(UnexpectedChartError):
        start(PAYMENT).send(action.removeprefix("send "))


def test_samples_give_events_their_data() -> None:
    found = explore(PAYMENT, samples={"pay": [{"amount": 5}, {"amount": 50}]})
    assert found.errors == ()
    assert found.unreached == ()


def test_host_invocations_are_answered_and_failed() -> None:
    machine = statifier.compile((ROOT / "examples" / "capture.scxml").read_text())
    plain = explore(machine)
    assert [(e.action, e.error) for e in plain.errors] == [("answer capture", "error.execution")]
    answered = explore(machine, samples={"done.invoke.capture": [{"capture_id": "c1"}]})
    assert answered.errors == ()
    assert answered.unreached == ()


def test_a_seeded_datamodel_is_the_start() -> None:
    machine = statifier.compile((ROOT / "examples" / "price_order.scxml").read_text())
    assert {e.error for e in explore(machine).errors} == {"error.execution"}
    seeded = explore(machine, datamodel={"item": {"order": "o1", "qty": 2, "unit_cents": 5}})
    assert seeded.errors == ()


def test_a_runaway_macrostep_is_reported() -> None:
    machine = chart(
        """<state id="s"><transition event="spin" target="t"/></state>
        <state id="t"><transition target="u"/></state>
        <state id="u"><transition target="t"/></state>""",
        name="spin",
        initial="s",
    )
    found = explore(machine)
    assert [(e.action, e.error) for e in found.errors] == [
        ("send spin", "budget exhausted (rounds)")
    ]


def test_events_only_the_platform_raises_are_not_sent_by_hand() -> None:
    machine = chart(
        """<state id="s">
          <transition event="done.state.x error.execution done.invoke.y *" target="t"/>
          <transition event="order.*" target="t"/>
        </state>
        <state id="t"/>""",
        initial="s",
    )
    assert explore(machine).events == ("order",)


@pytest.mark.parametrize("bound", [0, -1, 1_000_001])
def test_the_bound_is_checked(bound: int) -> None:
    with pytest.raises(ValueError, match=r"max_states must be in 1\.\.1000000"):
        explore(COUNTER, max_states=bound)
