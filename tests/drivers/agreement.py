"""What the driver-agreement tests share: the charts, and the events a run delivered.

Every driver (the virtual driver, a live ``Session``, a session with durable timers, a
durable execution) runs these charts; the events the top-level execution dequeues (its
trace) must be identical, ``caller_context`` included. Origins naming an invoked child
are normalized, since each driver mints child session ids of its own.
"""

from __future__ import annotations

from typing import Any

from statifier.core import effects as fx

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


def delivered(effects: list[fx.Effect], session_id: str = SESSION) -> list[tuple[Any, ...]]:
    """The dequeued events, in order, with child origins normalized."""
    rows = []
    for effect in effects:
        if not isinstance(effect, fx.EventDequeued):
            continue
        event = effect.event
        origin = event.origin
        if origin is not None and origin != f"#_scxml_{session_id}":
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
