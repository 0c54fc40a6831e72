"""Charts the engine's tests share."""

from __future__ import annotations

CAPTURE = """<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python"
        name="capture" initial="capturing">
  <datamodel><data id="result" expr="None"/><data id="amount" expr="125"/></datamodel>
  <state id="capturing">
    <onentry><send id="give_up" event="timeout" delay="30s"/></onentry>
    <invoke id="cap" type="payments:capture"><param name="amount" expr="amount"/></invoke>
    <transition event="done.invoke.cap" target="settled">
      <assign location="result" expr="_event.data"/>
    </transition>
    <transition event="error.communication.invoke.cap" target="failed">
      <assign location="result" expr="_event.data"/>
    </transition>
    <transition event="timeout" target="failed"/>
  </state>
  <final id="settled"><donedata><param name="result" expr="result"/></donedata></final>
  <final id="failed"/>
</scxml>"""
"""Captures a payment through a host invocation (``payments:capture``, id ``cap``), with
a 30 s timeout (send id ``give_up``); ``result`` holds the answer or the failure."""
