"""The chart every cancel race of issue 18 is played on, by each durable driver.

A card hold (``hold``, an hour) armed on entering ``held`` and cancelled on leaving it.
``rearm`` cancels it and sends it again, ``drop`` cancels it, ``leave`` exits the state
(its onexit cancels it); ``expired`` ends the chart from anywhere in ``card``. The
durable-execution tests fire the hold after each race directly; the oban tests let a real
worker fetch its job first.
"""

from __future__ import annotations

HOLD = """
<scxml xmlns="http://www.w3.org/2005/07/scxml" name="hold" initial="card">
  <state id="card" initial="held">
    <transition event="expired" target="expired"/>
    <state id="held">
      <onentry><send id="hold" event="expired" delay="1h"/></onentry>
      <onexit><cancel sendid="hold"/></onexit>
      <transition event="rearm">
        <cancel sendid="hold"/>
        <send id="hold" event="expired" delay="{rearmed}"/>
      </transition>
      <transition event="drop"><cancel sendid="hold"/></transition>
      <transition event="leave" target="waiting"/>
      <transition event="more"><send id="more" event="ping" delay="1h"/></transition>
    </state>
    <state id="waiting"/>
  </state>
  <final id="expired"/>
</scxml>
"""
"""The chart's source; ``{rearmed}`` is the delay of the re-armed hold."""
