"""Every driver delivers the same events, because every driver plans with the planner.

Each chart runs on the virtual driver and on a live ``Session``; the events the top-level
execution dequeues (its trace) must be identical, ``caller_context`` included. Origins
that name an invoked child are normalized (child session ids are minted per driver).
The durable drivers join this comparison in ``statifier_oban``'s tests.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import statifier
from statifier.core import effects as fx
from statifier.runtime.session import Message, Session
from statifier.virtual import VirtualDriver

SESSION = "sess_agree"
CONTEXT = {"trace": "T1"}

CALLER_CONTEXT_CHART = """
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" initial="a">
  <state id="a">
    <onentry><send event="tick" delay="10ms" id="t1"><param name="n" expr="1"/></send></onentry>
    <transition event="tick" target="b"/>
  </state>
  <state id="b">
    <onentry>
      <send event="tock"/>
      <send event="inner" target="#_internal" delay="5ms"/>
      <send event="lost" target="#_scxml_nobody"/>
    </onentry>
    <transition event="tock" target="c"/>
  </state>
  <state id="c"><transition event="inner" target="d"/></state>
  <final id="d"/>
</scxml>
"""

INVOKE_CHART = """
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" initial="p">
  <state id="p">
    <invoke id="kid" type="scxml">
      <content>
        <scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" initial="k">
          <state id="k">
            <onentry>
              <send target="#_parent" event="hello"><param name="x" expr="1"/></send>
            </onentry>
            <transition event="go" target="kdone"/>
          </state>
          <final id="kdone"><donedata><param name="y" expr="2"/></donedata></final>
        </scxml>
      </content>
    </invoke>
    <transition event="hello"><send target="#_kid" event="go"/></transition>
    <transition event="done.invoke.kid" target="end"/>
  </state>
  <final id="end"/>
</scxml>
"""

CHARTS = {"caller_context": CALLER_CONTEXT_CHART, "invoke": INVOKE_CHART}


def delivered(effects: list[fx.Effect]) -> list[tuple[Any, ...]]:
    """The dequeued events, in order, with child origins normalized."""
    rows = []
    for effect in effects:
        if not isinstance(effect, fx.EventDequeued):
            continue
        event = effect.event
        origin = event.origin
        if origin is not None and origin != f"#_scxml_{SESSION}":
            origin = "#_scxml_<child>"
        rows.append(
            (
                effect.source,
                event.name,
                event.type,
                event.data,
                event.sendid,
                origin,
                event.origintype,
                event.invokeid,
                event.caller_context,
            )
        )
    return rows


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
