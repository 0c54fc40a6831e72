"""Issue 13: limits with typed errors, bounded caches and a near-linear wide ``<parallel>``."""

from __future__ import annotations

import gc
import time
import tracemalloc

import pytest
import statifier
from statifier.chart import compiler, xmltree
from statifier.chart.durations import InvalidDuration, parse_duration
from statifier.core import effects as fx
from statifier.core.algorithm import _MEMO_LIMIT
from statifier.datamodel.python.context import CONTEXT_POOL, NO_STATES, NO_VARIABLES
from statifier.errors import ChartError
from statifier.runtime.invoke import TreeLimits
from statifier.runtime.session import Session
from statifier.virtual.driver import VirtualDriver

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'


def _codes(caught: pytest.ExceptionInfo[ChartError]) -> list[str]:
    return [d.code for d in caught.value.diagnostics]


# -- compile-time limits -----------------------------------------------------------------


def test_a_chart_without_states_fails_compile() -> None:
    with pytest.raises(ChartError) as caught:
        statifier.compile(f"<scxml {NS}/>")
    assert _codes(caught) == ["no-states"]


def test_an_unknown_encoding_is_a_chart_error() -> None:
    source = f'<?xml version="1.0" encoding="x-bogus"?><scxml {NS}><state/></scxml>'
    with pytest.raises(ChartError) as caught:
        statifier.compile(source.encode())
    assert _codes(caught) == ["unknown-encoding"]


def test_chart_size_and_state_count_are_limited() -> None:
    padding = " " * (compiler.MAX_CHART_BYTES + 1)
    with pytest.raises(ChartError) as caught:
        statifier.compile(f"<scxml {NS}><state/>{padding}</scxml>")
    assert _codes(caught) == ["too-large"]
    states = "<state/>" * (compiler.MAX_STATES + 1)
    with pytest.raises(ChartError) as caught:
        statifier.compile(f"<scxml {NS}>{states}</scxml>")
    assert _codes(caught) == ["too-large"]


def test_diagnostics_per_compile_are_limited() -> None:
    bad = '<transition target="nowhere"/>' * 5_000
    with pytest.raises(ChartError) as caught:
        statifier.compile(f'<scxml {NS}><state id="s">{bad}</state></scxml>')
    codes = _codes(caught)
    assert len(codes) <= compiler.MAX_DIAGNOSTICS + 1
    assert codes[-1] == "too-many-errors"


def test_digits_in_a_duration_are_limited() -> None:
    started = time.perf_counter()
    with pytest.raises(InvalidDuration, match="longer than"):
        parse_duration("9" * 999_990 + "ms")
    assert time.perf_counter() - started < 0.5  # reading the digits took 26-53 s
    assert parse_duration("1.5s") == 1500


def test_a_long_token_reaches_expat_in_one_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    # Fed in 64 KB chunks, expat scanned a token spanning them again from its start at
    # every chunk: a 50 MB attribute value took 21 s. One piece is one scan (linear), and
    # a count of pieces fails where a timed run only grows slow.
    fed: list[int] = []
    feed = xmltree._ChartParser.feed

    def counted(parser: xmltree._ChartParser, data: bytes, isFinal: bool = False) -> None:
        if data:
            fed.append(len(data))
        feed(parser, data, isFinal)

    monkeypatch.setattr(xmltree._ChartParser, "feed", counted)
    token = "a" * 1_000_000
    source = f'<scxml {NS}><state id="s"><transition event="{token}"/></state></scxml>'.encode()
    root = xmltree.parse(source)
    assert len(root.children[0].children[0].attrs[(None, "event")]) == 1_000_000
    assert fed == [len(source)]


# -- bounded caches ----------------------------------------------------------------------


def test_event_name_memo_is_bounded() -> None:
    machine = statifier.compile(
        f'<scxml {NS}><state id="s"><transition event="e.*"/></state></scxml>'
    )
    state, _ = statifier.initialize(machine, session_id="s")
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(20_000):
            state, _ = statifier.handle_event(state, f"e.name{n}")
        state, _ = statifier.handle_event(state, "e." + "x" * 100_000)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # The memo of event matches and entry sets, plus the named memos (selection, steps,
    # shared state sets, position checks), each bounded by its owner.
    assert len(machine._cache) <= _MEMO_LIMIT + 4
    assert all(len(memo) <= 4096 for name, memo in machine._cache.items() if type(name) is str)
    assert grown < 2_000_000, grown


def test_compiled_expression_memo_keeps_no_long_expression() -> None:
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        # Kept, each chart's expression would hold about 24 KB: 20 of them 470 KB.
        for n in range(20):
            long_expression = "[" + ", ".join(["x"] * 2_000) + f", {n}]"
            statifier.compile(
                f'<scxml {NS}><datamodel><data id="x" expr="1"/><data id="y" '
                f'expr="{long_expression}"/></datamodel><state/></scxml>'
            )
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 200_000, kept  # every chart was dropped: nothing of them stays


def test_pooled_evaluation_contexts_keep_no_run_alive() -> None:
    machine = statifier.compile(
        f'<scxml {NS}><datamodel><data id="big" expr="[0] * 1000"/></datamodel>'
        '<state id="s"><transition event="go" cond="len(big) &gt; 0" target="s"/></state></scxml>'
    )
    state, _ = statifier.initialize(machine, session_id="s")
    statifier.handle_event(state, "go")
    assert CONTEXT_POOL
    assert all(c.in_state is NO_STATES and c.variables is NO_VARIABLES for c in CONTEXT_POOL)


# -- a wide <parallel> -------------------------------------------------------------------


def test_a_parallel_with_1000_regions_handles_events_in_near_linear_time() -> None:
    regions = "".join(
        f'<state id="r{i}"><state id="a{i}"><transition event="e" target="b{i}"/>'
        f'<transition event="x" target="out"/></state>'
        f'<state id="b{i}"><transition event="e" target="a{i}"/>'
        f'<transition event="x" target="out"/></state></state>'
        for i in range(1000)
    )
    machine = statifier.compile(
        f'<scxml {NS}><state id="top"><parallel id="p">{regions}</parallel>'
        '<state id="out"><transition event="back" target="p"/></state></state></scxml>'
    )
    state, _ = statifier.initialize(machine, session_id="s")
    started = time.perf_counter()
    state, _ = statifier.handle_event(state, "e")
    assert state.is_active("b999")
    state, _ = statifier.handle_event(state, "x")  # 1000 conflicting transitions
    assert state.is_active("out")
    assert not state.is_active("p")
    state, _ = statifier.handle_event(state, "back")
    elapsed = time.perf_counter() - started
    assert state.is_active("a0")
    assert state.is_active("a999")
    assert elapsed < 3, elapsed  # the conflicting event alone took 21 s


# -- invocation trees --------------------------------------------------------------------

SELF_INVOKING = f"""<scxml {NS}><state id="s">
  <invoke type="scxml" src="self"/>
  <transition event="error.*" target="failed"/>
</state><state id="failed"/></scxml>"""


def _resolve(src: str) -> str:
    return SELF_INVOKING


async def test_a_chart_that_invokes_copies_of_itself_stops_at_the_tree_depth() -> None:
    machine = statifier.compile(SELF_INVOKING)
    top = await Session.start(machine, resolver=_resolve, tree_limits=TreeLimits(depth=5))
    try:
        for _ in range(200):
            await _settle()
            if top.tree.live == 6:
                break
        assert top.tree.live == 6  # the top session and five levels of children
        deepest = top
        for _ in range(5):
            (invoke_id,) = deepest.snapshot().invocations.values()
            child = deepest.child(invoke_id)
            assert child is not None
            deepest = child
        assert deepest.status().configuration == ("failed",)
    finally:
        await top.stop()
    assert top.tree.live == 0


def test_the_virtual_driver_bounds_the_tree_of_sessions() -> None:
    machine = statifier.compile(SELF_INVOKING)
    driver = VirtualDriver(machine, resolver=_resolve, tree_limits=TreeLimits(sessions=10))
    driver.start()
    driver.run_until_idle()
    assert len(driver.sessions) == 10
    failed = [s for s in driver.sessions.values() if s.state.is_active("failed")]
    assert len(failed) == 1


async def _settle() -> None:
    import asyncio

    await asyncio.sleep(0.01)


def test_messages_from_failed_invocations_are_errors() -> None:
    # A self-invoking tree used to grow to 1,300 sessions and a raw MemoryError.
    machine = statifier.compile(SELF_INVOKING)
    driver = VirtualDriver(machine, resolver=_resolve, tree_limits=TreeLimits(depth=3))
    observed: list[fx.Effect] = []
    driver.observer = lambda sid, effect: observed.append(effect)
    driver.start()
    driver.run_until_idle()
    assert len(driver.sessions) == 4
    assert any(isinstance(e, fx.ErrorRaised) and "nest" in e.message for e in observed)
