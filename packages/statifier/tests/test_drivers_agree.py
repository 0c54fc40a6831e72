"""Every driver delivers the same events, because every driver plans with the planner.

The virtual driver and a live ``Session`` here; the durable drivers join the comparison
in ``statifier_oban``'s tests (``tests/drivers/agreement.py`` holds the charts).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import statifier
from statifier.core import effects as fx
from statifier.runtime.session import Message, Session
from statifier.virtual import VirtualDriver

from tests.drivers.agreement import (
    CALLER_CONTEXT_CHART,
    CHARTS,
    CONTEXT,
    INVOKE_CHART,
    SESSION,
    delivered,
)


def run_virtual(source: str) -> tuple[list[tuple[Any, ...]], tuple[str, ...]]:
    machine = statifier.compile(source)
    driver = VirtualDriver(machine, session_id=SESSION, trace=True, caller_context=CONTEXT)
    driver.start()
    driver.advance()
    done = [effect for effect in driver.effects if isinstance(effect, fx.Done)]
    assert done, "the virtual run did not finish"
    return delivered(driver.effects), done[-1].configuration


async def run_live(source: str) -> tuple[list[tuple[Any, ...]], tuple[str, ...]]:
    machine = statifier.compile(source)
    seen: list[fx.Effect] = []

    def collect(_: str, message: Message) -> None:
        if isinstance(message, fx.Effect):
            seen.append(message)

    session = await Session.start(
        machine, session_id=SESSION, trace=True, caller_context=CONTEXT, subscribers=[collect]
    )
    try:
        await asyncio.wait_for(session.wait_halted(), timeout=10)
    finally:
        await session.stop()
    done = [effect for effect in seen if isinstance(effect, fx.Done)]
    assert done, "the live run did not finish"
    return delivered(seen), done[-1].configuration


@pytest.mark.parametrize("name", sorted(CHARTS))
async def test_virtual_and_live_deliver_the_same_events(name: str) -> None:
    virtual = run_virtual(CHARTS[name])
    live = await run_live(CHARTS[name])
    assert live == virtual


def test_a_delayed_send_carries_the_caller_context_of_its_macrostep() -> None:
    events, configuration = run_virtual(CALLER_CONTEXT_CHART)
    by_name = {row[1]: row for row in events}
    assert by_name["tick"][-1] == CONTEXT  # fired by a timer armed in the first macrostep
    assert by_name["tick"][3] == {"n": 1}
    assert by_name["tick"][4] == "t1"  # the author wrote the id
    assert by_name["tock"][-1] == CONTEXT  # an immediate send from the tick macrostep
    assert by_name["tock"][4] is None  # a generated id is not observable
    assert by_name["inner"][2] == "internal"
    assert by_name["error.communication"][2] == "platform"
    assert configuration == ("d",)


def test_an_invocation_answer_carries_the_context_of_the_invoking_macrostep() -> None:
    events, _ = run_virtual(INVOKE_CHART)
    by_name = {row[1]: row for row in events}
    assert by_name["hello"][7] == "kid"
    assert by_name["hello"][5] == "#_scxml_<child>"
    assert by_name["done.invoke.kid"][3] == {"y": 2}
    assert by_name["done.invoke.kid"][-1] == CONTEXT


EXHAUSTING_CHART = """<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" initial="a">
  <state id="a">
    <onentry><send event="tick" delay="10ms"/><raise event="again"/></onentry>
    <transition event="again" target="a"/>
    <transition event="later" target="end"/>
    <transition event="tick" target="end"/>
  </state>
  <final id="end"/>
</scxml>"""


async def test_an_exhausted_budget_halts_the_execution_in_every_driver() -> None:
    """The planner says ``Halt`` for ``BudgetExhausted`` as for ``Done``: no driver goes on
    processing the events (or timers) of an execution that ran out of its budget."""
    machine = statifier.compile(EXHAUSTING_CHART)
    driver = VirtualDriver(machine, session_id=SESSION)
    driver.start()
    driver.send("later")
    driver.advance()
    virtual = driver.state.configuration_ids()

    session = await Session.start(machine, session_id=SESSION)
    try:
        session.send_event("later")
        await asyncio.wait_for(session.wait_halted(), timeout=10)
        await asyncio.sleep(0.05)  # the timer's due time passes
        live = session.snapshot().configuration_ids()
        status = session.status().status
    finally:
        await session.stop()
    assert status == "budget_exhausted"
    assert driver.sessions[SESSION].halted
    assert virtual == live == ("a",)
