"""The tracing seam (``statifier.instrumentation``) on a live session, with a recording
instrumentation (``engine_support.recording``): a span per macrostep with its facts, the
context an entry was queued from as its parent, a cancel in a new trace; off, nothing.
"""

from __future__ import annotations

import asyncio

import statifier
from statifier import instrumentation
from statifier.runtime.session import Session

from engine_support.recording import Recording

CHART = statifier.compile(
    """<scxml xmlns="http://www.w3.org/2005/07/scxml" name="lamp" initial="off">
  <state id="off"><transition event="flip" target="on"/></state>
  <state id="on">
    <onentry><send id="t" event="tick" delay="5ms"/></onentry>
    <transition event="tick" target="ticked"/>
  </state>
  <state id="ticked"><transition event="flip" target="off"/></state>
</scxml>"""
)


async def settle(session: Session) -> None:
    """Wait until the session's inbox is processed."""
    for _ in range(200):
        if session._task is None and not session._inbox:
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the session did not settle")


async def test_every_macrostep_is_a_span_with_the_context_it_was_sent_from() -> None:
    recording = Recording()
    with instrumentation.installed(recording):
        session = await Session.start(CHART, session_id="sess_lamp")
        with recording.span("Request") as request:
            session.send_event(statifier.Event(name="flip", data={"secret": "SECRET"}))
        for _ in range(400):  # the tick fires on the loop's clock
            if session.snapshot().is_active("ticked"):
                break
            await asyncio.sleep(0.005)
        session.send_event("flip")
        await settle(session)
        await session.cancel_and_wait()
    spans = [(span.operation, span.facts.get("trigger"), span.facts.get("event"))
             for span in recording.spans]  # fmt: skip
    assert spans == [
        ("Macrostep", "initial", None),
        ("Request", None, None),
        ("Macrostep", "event", "flip"),
        ("Macrostep", "timer", "tick"),  # the fired send routed: to the session itself
        ("Macrostep", "event", "tick"),
        ("Macrostep", "event", "flip"),
        ("Macrostep", "cancel", None),
    ]
    initial, _, flipped, fired, ticked, back, cancelled = recording.spans
    assert initial.facts == {
        "session_id": "sess_lamp",
        "chart": "lamp",
        "trigger": "initial",
        "states": ("off",),
    }
    assert initial.parent is None  # the caller's context
    assert flipped.parent == request.number
    assert flipped.facts["states"] == ("on",)
    assert back.parent is None  # sent outside any span: a context of none
    assert fired.parent is None  # queued by the loop's timer, outside any span
    assert ticked.parent == fired.number
    assert ticked.facts["states"] == ("ticked",)
    assert cancelled.parent is instrumentation.NO_PARENT
    assert "SECRET" not in repr([span.facts for span in recording.spans])


async def test_off_the_seam_costs_nothing_and_hooks_do_nothing() -> None:
    assert instrumentation.current is None
    session = await Session.start(CHART)
    session.send_event("flip")
    await settle(session)
    assert session.snapshot().active_leaf_ids() in (("on",), ("ticked",))
    assert instrumentation.carrier() is None
    assert instrumentation.log_ids() == {}
    with instrumentation.continued({"traceparent": "anything"}):
        pass
    await session.stop()


def test_install_returns_what_it_replaces() -> None:
    first, second = Recording(), Recording()
    assert instrumentation.install(first) is None
    try:
        assert instrumentation.install(second) is first
        with instrumentation.installed(None):
            assert instrumentation.current is None
        assert instrumentation.current is second
        with second.span("Step"):
            assert instrumentation.log_ids() == {"trace_id": "t1", "span_id": "s1"}
            assert instrumentation.carrier() == {"span": "1"}
    finally:
        instrumentation.install(None)
