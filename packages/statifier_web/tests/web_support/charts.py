"""Charts the statifier_web tests register and run."""

from __future__ import annotations

import statifier

CARD_SOURCE = """<scxml xmlns="http://www.w3.org/2005/07/scxml" name="card" initial="authorized">
  <datamodel>
    <data id="captures" expr="0"/>
    <data id="hold" expr="'1h'"/>
    <data id="note" expr="''"/>
  </datamodel>
  <state id="authorized">
    <onentry><send id="hold" event="authorization.expired" delayexpr="hold"/></onentry>
    <onexit><cancel sendid="hold"/></onexit>
    <transition event="capture.requested" target="capturing"/>
    <transition event="authorization.expired" target="expired"/>
    <transition event="note">
      <assign location="note" expr="_event.data"/>
    </transition>
  </state>
  <state id="capturing">
    <onentry><assign location="captures" expr="captures + 1"/></onentry>
    <transition event="capture.succeeded" target="settled"/>
    <transition event="note">
      <assign location="note" expr="_event.data"/>
    </transition>
  </state>
  <final id="settled"/>
  <final id="expired"/>
</scxml>"""
"""A card authorization: ``hold`` (a delay, an hour unless seeded) expires it; ``note``
stores its data in ``note``."""

CARD = statifier.compile(CARD_SOURCE)

XSS = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"
"""Markup that would run if the console rendered it as HTML."""

XSS_CHART = statifier.compile(
    """<scxml xmlns="http://www.w3.org/2005/07/scxml" initial="waiting">
  <datamodel><data id="payload" expr="''"/></datamodel>
  <state id="waiting">
    <transition event="go" cond="payload != '&lt;script&gt;alert(1)&lt;/script&gt;'"
                target="done"/>
  </state>
  <final id="done"/>
</scxml>""",
    name="<b>xss</b>",
)
"""A chart whose name and whose transition's condition hold markup."""
