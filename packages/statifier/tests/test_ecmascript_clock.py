"""Each call into an ECMAScript engine is held to its CPU time limit by an interrupt handler
of the datamodel's own, which reads the clock only from the engine's first interrupt check
in a call (issue 19: the binding's limit read it at every call).

What must hold: a runaway call is stopped; every call, the hot paths' direct calls included,
starts its limit afresh (a limit left over from an earlier call never stops a later one);
and when the binding is not laid out as expected, its own time limit still stops a runaway.
"""

from __future__ import annotations

import json
import time

import pytest
import statifier
from statifier.core import effects as fx
from statifier.datamodel.ecmascript import _instance
from statifier.datamodel.ecmascript._instance import Context, Instance, JSFailure, Setup
from statifier.datamodel.ecmascript.charges import NO_LIMIT
from statifier.datamodel.ecmascript.limits import DEFAULT_LIMITS, Limits
from statifier.datamodel.host import HostFunctions

SPIN = "(() => { let s = 0; for (let i = 0; i < 200000; i++) s += i; return s })()"
"""An expression whose evaluation passes the engine's interrupt checks many times."""

STALE = 1e-9
"""A deadline long past (process CPU seconds): a call that kept it would stop at once."""


def test_the_handler_is_installed_here() -> None:
    # The rest of the suite runs on this path: the binding is laid out as expected.
    assert Context(DEFAULT_LIMITS)._own


def test_a_runaway_call_is_stopped() -> None:
    context = Context(Limits(cpu_seconds=0.2))
    started = time.process_time()
    with pytest.raises(JSFailure, match="interrupted") as raised:
        context.call(context.context.eval, "while (true) {}")
    assert raised.value.limit
    assert time.process_time() - started < 5
    # The engine answers afterwards, under a fresh limit.
    assert context.call(context.context.eval, SPIN) == 19999900000


def test_every_call_starts_its_limit_afresh() -> None:
    instance = Instance(Setup({}, HostFunctions()), NO_LIMIT)
    context = instance.context
    spin = instance.compiled("expression", SPIN)
    # Only a deadline that no call resets stops a call: the handler is the one at work.
    context.clock.deadline = STALE
    with pytest.raises(Exception, match="interrupted"):
        context.context.eval(SPIN)
    # ``Context.call`` and the prelude's functions as the hot paths call them directly.
    context.clock.deadline = STALE
    assert context.call(context.context.eval, SPIN) == 19999900000
    context.clock.deadline = STALE
    assert instance.api.read(spin, None, float(NO_LIMIT), False) == 19999900000
    # A call leaves no deadline behind for what runs outside one (a box's JSON).
    assert context.clock.deadline == 0.0


def test_the_handler_stops_a_call_past_its_deadline_or_of_no_context() -> None:
    context = Context(DEFAULT_LIMITS)
    number = next(n for n, clock in _instance._CLOCKS.items() if clock is context.clock)
    context.clock.deadline = 0.0
    assert _instance._interrupted(None, number) == 0  # the first check starts the limit
    assert context.clock.deadline > time.process_time()
    assert _instance._interrupted(None, number) == 0
    context.clock.deadline = STALE
    assert _instance._interrupted(None, number) == 1
    assert _instance._interrupted(None, 0) == 1  # a runtime whose Context is gone


def test_a_context_that_is_gone_forgets_its_clock() -> None:
    context = Context(DEFAULT_LIMITS)
    clock = context.clock
    del context
    assert all(kept is not clock for kept in _instance._CLOCKS.values())


def test_without_the_handler_the_bindings_limit_stops_a_runaway(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_instance, "_runtime_of", lambda _quickjs, _context: None)
    context = Context(Limits(cpu_seconds=0.2))
    assert not context._own
    with pytest.raises(JSFailure, match="interrupted"):
        context.call(context.context.eval, "while (true) {}")
    with context.roomy():
        assert context.call(context.context.eval, SPIN) == 19999900000


HOT = statifier.compile(
    '<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript">'
    '<datamodel><data id="copy" expr="[]"/><data id="n" expr="0"/></datamodel>'
    '<state id="s">'
    '<transition event="e" cond="_event.data.items.length &gt; 0" target="s">'
    '<assign location="copy" expr="_event.data.numbers.slice()"/>'
    '<assign location="n" expr="copy.length"/>'
    "</transition>"
    '<transition event="e" target="s"/>'
    "</state></scxml>"
)
"""A chart whose event calls pass the engine's interrupt checks: the conditions' call
freezes an event of 20,000 objects (a call each), the run measures a new array of 50,000
numbers (a loop turn each)."""


def test_an_events_calls_start_their_limit_afresh() -> None:
    state, _ = statifier.initialize(HOT, session_id="hot")
    data = {"items": [{} for _ in range(20_000)], "numbers": list(range(50_000))}
    for _ in range(2):
        instance = state._datamodel_bound[1].instance  # type: ignore[index]
        # A deadline no call resets would stop the first check of either call.
        instance.context.clock.deadline = STALE
        state, effects = statifier.handle_event(state, statifier.Event(name="e", data=data))
        assert not [e for e in effects if isinstance(e, fx.ErrorRaised)]
        assert state.datamodel["n"] == 50_000
        assert instance.context.clock.deadline == 0.0


def test_the_engine_offers_charts_no_python_callable() -> None:
    # With our clock the binding's own time limit is off, and with it the binding's refusal
    # to call Python from JavaScript: the engine must register no Python callable. Its
    # global object is a bare engine's, less what the sandbox removes, plus only what the
    # prelude defines in JavaScript.
    listed = "JSON.stringify(Reflect.ownKeys(globalThis).filter(k => typeof k === 'string'))"
    bare = set(json.loads(_instance.load_quickjs().Context().eval(listed)))
    context = Context(DEFAULT_LIMITS)
    assert context._own
    ours = set(json.loads(context.context.eval(listed)))
    assert ours - bare == {"In", "_event", "_ioprocessors", "_name", "_sessionid"}
    source = context.context.eval("String(In)")
    assert "[native code]" not in source, source  # written in JavaScript, not bound
