"""Issue 13, "A macrostep is bounded as a whole": one budget per call of the core.

Each test is a small chart that used to exhaust memory or CPU (or put an unbounded value
into a message) and now ends with ``error.execution`` or ``BudgetExhausted`` quickly.
"""

from __future__ import annotations

import pytest
import statifier
from statifier.budget import MAX_LIMIT, MacrostepLimits
from statifier.core import effects as fx
from statifier.core.algorithm import Interpreter
from statifier.core.position import dumps
from statifier.errors import ExecutionResourceError
from statifier.values import measure

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'


def _chart(body: str, data: str = "") -> statifier.Machine:
    return statifier.compile(f'<scxml {NS} initial="s"><datamodel>{data}</datamodel>{body}</scxml>')


def _errors(effects: list[fx.Effect]) -> list[str]:
    return [e.message for e in effects if isinstance(e, fx.ErrorRaised)]


def _exhausted(effects: list[fx.Effect]) -> fx.BudgetExhausted:
    (found,) = [e for e in effects if isinstance(e, fx.BudgetExhausted)]
    return found


def test_a_long_string_repeated_into_the_datamodel_is_refused_and_the_state_saves() -> None:
    machine = _chart(
        '<state id="s"/>',
        '<data id="s" expr="\'x\' * 100000"/><data id="l" expr="[s] * 999999"/>',
    )
    state, effects = statifier.initialize(machine, session_id="s")
    assert state.datamodel["l"] is None
    assert any("'l'" in m and "larger than" in m for m in _errors(effects))
    assert len(dumps(state)) < 200_000


def test_shared_references_count_as_what_they_expand_to() -> None:
    machine = _chart(
        '<state id="s"><onentry><assign location="v" expr="[[[0] * 1000] * 1000] * 100"/>'
        "</onentry></state>",
        '<data id="v" expr="0"/>',
    )
    state, effects = statifier.initialize(machine, session_id="s")
    assert state.datamodel["v"] == 0
    assert any("larger than" in m for m in _errors(effects))
    dumps(state)  # used to take 77 s and 600 MB


def test_the_datamodel_cap_counts_the_whole_datamodel() -> None:
    limits = MacrostepLimits(datamodel_bytes=2_000)
    machine = _chart(
        '<state id="s"><onentry>'
        '<assign location="a" expr="[0] * 400"/>'  # ~1,200 bytes: fits
        '<assign location="b" expr="[0] * 400"/>'  # together ~2,400: refused
        '</onentry><onentry><assign location="a" expr="1"/>'
        '<assign location="b" expr="[0] * 400"/>'  # fits again
        "</onentry></state>",
        '<data id="a"/><data id="b"/>',
    )
    state, effects = statifier.initialize(machine, session_id="s", limits=limits)
    assert len(_errors(effects)) == 1
    assert state.datamodel["a"] == 1
    assert state.datamodel["b"] == [0] * 400


def _stored_size(state: statifier.MachineState) -> int:
    """The chart variables' size as ``dumps`` checks it against the cap."""
    variables = {k: v for k, v in state.datamodel.items() if not k.startswith("_")}
    return sum(measure(value, MAX_LIMIT)[0] for value in variables.values())


@pytest.mark.parametrize("key", ["k", "mixed", "\u00e9" * 8, "\U0001f600" * 4, "\x00\x01"])
def test_a_new_key_is_counted_as_a_position_writes_it(key: str) -> None:
    """A write under a new key computed from an event is admitted only while the datamodel,
    the key written out (quoted, escaped) included, stays within the cap: whatever the
    engine keeps, ``dumps`` stores."""
    limits = MacrostepLimits(datamodel_bytes=150)
    machine = _chart(
        '<state id="s"><transition event="put">'
        "<assign location=\"d[_event.data['k']]\" expr=\"_event.data['v']\"/>"
        "</transition></state>",
        '<data id="d" expr="{}"/>',
    )
    state, _ = statifier.initialize(machine, session_id="s", limits=limits)
    refused = 0
    for n in range(30):
        data = {"k": f"{key}{n}", "v": [n] if n % 2 else 0}
        state, effects = statifier.handle_event(state, statifier.Event(name="put", data=data))
        refused += len(_errors(effects))
        assert _stored_size(state) <= 150
        dumps(state)
    assert refused  # the cap was reached


def test_spelled_out_keys_written_in_one_run_stay_within_the_cap() -> None:
    """The same for a run of spelled-out keys (``d.k1``), at every cap from one that takes
    none of them to one that takes them all."""
    assigns = "".join(f'<assign location="d.k{n}" expr="[{n}]"/>' for n in range(8))
    machine = _chart(
        f'<state id="s"><transition event="put">{assigns}</transition></state>',
        '<data id="d" expr="{}"/>',
    )
    for cap in range(2, 90):
        limits = MacrostepLimits(datamodel_bytes=cap)
        state, _ = statifier.initialize(machine, session_id="s", limits=limits)
        state, _ = statifier.handle_event(state, statifier.Event(name="put"))
        assert _stored_size(state) <= cap, cap
        dumps(state)


def test_an_unbounded_value_never_reaches_a_message() -> None:
    machine = _chart(
        '<state id="s"><onentry><send eventexpr="[[[0] * 1000] * 1000] * 100"/>'
        "<cancel sendidexpr=\"['y' * 100000] * 1000\"/></onentry></state>"
    )
    _, effects = statifier.initialize(machine, session_id="s")
    messages = _errors(effects)
    assert messages
    assert all(len(m) < 500 for m in messages)


def test_a_long_exception_message_is_cut_short_in_the_error() -> None:
    """Whatever raised (a host function, a chart's own ``throw``), the ``error.execution``
    message, which becomes ``_event.data`` and a log line, stays short."""

    def noisy() -> None:
        raise ValueError("bad payload " + "x" * 5_000_000)

    machine = statifier.compile(
        f'<scxml {NS} initial="s"><state id="s"><onentry>'
        '<log expr="noisy()"/></onentry></state></scxml>',
        functions={"noisy": noisy},
    )
    state, effects = statifier.initialize(machine, session_id="s")
    (message,) = _errors(effects)
    assert message.startswith("'noisy()': noisy() raised ValueError: bad payload xxx")
    assert len(message) < 2_000
    assert len(dumps(state)) < 10_000
    ecmascript = statifier.compile(
        f'<scxml {NS} datamodel="ecmascript" initial="s"><state id="s"><onentry>'
        "<script>throw 'x'.repeat(5000000)</script></onentry></state></scxml>"
    )
    _, effects = statifier.initialize(ecmascript, session_id="s")
    (message,) = _errors(effects)
    assert message.startswith("script: xxx")
    assert len(message) < 2_000


def test_an_integer_too_long_to_write_out_is_refused_where_it_enters() -> None:
    """A host function's result passes the same storable-value rules as any value: an
    integer with more digits than Python writes out is refused when it is stored or sent,
    not discovered when the position is saved."""
    machine = statifier.compile(
        f'<scxml {NS} initial="s"><datamodel><data id="r" expr="0"/></datamodel>'
        '<state id="s"><onentry><assign location="r" expr="huge()"/></onentry>'
        '<onentry><send event="x"><param name="v" expr="huge()"/></send></onentry>'
        "</state></scxml>",
        functions={"huge": lambda: 10**5000},
    )
    state, effects = statifier.initialize(machine, session_id="s")
    assert state.datamodel["r"] == 0
    assert [m.split(":")[0] for m in _errors(effects)] == [
        "cannot assign to 'r'",
        "cannot hand out the value",
    ]
    assert not [e for e in effects if isinstance(e, fx.Send)]
    dumps(state)


def test_datamodel_changes_carry_no_values_outside_trace_mode() -> None:
    machine = _chart(
        '<state id="s"><onentry><foreach array="list(range(2000))" item="i">'
        '<assign location="acc" expr="acc + [i]"/></foreach></onentry></state>',
        '<data id="acc" expr="[]"/>',
    )
    state, effects = statifier.initialize(machine, session_id="s")
    changes = [e for e in effects if isinstance(e, fx.DatamodelChange)]
    assert len(changes) == 4001  # the data, then item and assignment per iteration
    assert all(c.new_value is fx.NOT_RECORDED and c.prior_value is fx.NOT_RECORDED for c in changes)
    assert changes[-1].location == "acc"
    assert changes[-1].path == ()
    assert state.datamodel["acc"] == list(range(2000))
    _, traced = statifier.initialize(machine, session_id="s", trace=True)
    last = [e for e in traced if isinstance(e, fx.DatamodelChange)][-1]
    assert last.new_value == list(range(2000))
    assert last.prior_value == list(range(1999))


def test_nested_foreach_loops_end_with_the_steps_budget() -> None:
    machine = _chart(
        '<state id="s"><onentry><foreach array="list(range(1000))" item="a">'
        '<foreach array="list(range(1000))" item="b"><foreach array="list(range(1000))" item="c">'
        '<log label="x"/></foreach></foreach></foreach></onentry>'
        '<transition event="go" target="t"/></state><state id="t"/>'
    )
    state, effects = statifier.initialize(
        machine, session_id="s", limits=MacrostepLimits(steps=200_000)
    )
    assert _exhausted(effects).reason == "steps"
    assert any("steps budget" in m for m in _errors(effects))
    assert state.running
    # The next macrostep has a fresh budget.
    state, effects = statifier.handle_event(state, "go")
    assert state.is_active("t")


def test_an_eventless_loop_that_spends_its_evaluation_budget_each_round_ends() -> None:
    machine = _chart(
        '<state id="s"><transition cond="len([i for i in range(120000)]) &gt; 0" target="s">'
        '<assign location="n" expr="n + 1"/></transition></state>',
        '<data id="n" expr="0"/>',
    )
    state, effects = statifier.initialize(machine, session_id="s")
    exhausted = _exhausted(effects)
    assert exhausted.reason == "steps"
    assert exhausted.budget == 10_000_000
    assert 5 <= state.datamodel["n"] <= 20  # used to be 10,000 rounds of a full budget


def test_effects_and_internal_events_are_budgeted() -> None:
    logs = _chart(
        '<state id="s"><onentry><foreach array="list(range(5000))" item="i">'
        '<log label="x"/></foreach></onentry></state>'
    )
    _, effects = statifier.initialize(logs, session_id="s", limits=MacrostepLimits(effects=500))
    assert _exhausted(effects).reason == "effects"
    assert len(effects) < 520
    raises = _chart(
        '<state id="s"><onentry><foreach array="list(range(5000))" item="i">'
        '<raise event="e"/></foreach></onentry></state>'
    )
    state, effects = statifier.initialize(
        raises, session_id="s", limits=MacrostepLimits(internal_events=100)
    )
    assert _exhausted(effects).reason == "internal_events"
    assert len(state.internal_queue) <= 102


@pytest.mark.parametrize("datamodel", ["python", "ecmascript"])
def test_a_block_stops_at_the_internal_event_budget(datamodel: str) -> None:
    """Each node is checked against the queue as it is then: a call's queue starts empty
    (no deque) and the first event queued makes one, which the check must see."""
    machine = statifier.compile(
        f'<scxml {NS} initial="s" datamodel="{datamodel}"><state id="s"><onentry>'
        + '<raise event="e"/>' * 5
        + "</onentry></state></scxml>"
    )
    state, effects = statifier.initialize(
        machine, session_id="s", limits=MacrostepLimits(internal_events=2)
    )
    # Two raised, then the third node's check queues the budget's error and ends the block.
    assert [event.name for event in state.internal_queue] == ["e", "e", "error.execution"]
    assert "internal_events budget" in _errors(effects)[0]
    assert _exhausted(effects).reason == "internal_events"


def _shared_guards(regions: int, guards: int, cond: str, datamodel: str) -> statifier.Machine:
    """``top``'s ``guards`` transitions on ``e``, each with ``cond``, above a
    ``<parallel>`` of ``regions`` atomic regions: selecting for ``e`` evaluates every one
    of them once per region (Appendix D walks each active atomic state's ancestors)."""
    transitions = f'<transition event="e" cond="{cond}"/>' * guards
    regions_xml = "".join(f'<state id="r{i}"/>' for i in range(regions))
    return statifier.compile(
        f'<scxml {NS} initial="top" datamodel="{datamodel}"><datamodel><data id="x" expr="0"/>'
        f'</datamodel><state id="top">{transitions}<parallel id="p">{regions_xml}</parallel>'
        '<transition event="go" target="end"/></state><final id="end"/></scxml>'
    )


@pytest.mark.parametrize("datamodel", ["python", "ecmascript"])
def test_guards_past_the_steps_budget_are_not_evaluated_and_raise_one_error(
    datamodel: str,
) -> None:
    # Each guard left once the budget ran out failed again, each with its own error and
    # effect: 800 regions under 800 guards queued 630,000 errors and took 24 s (ECMAScript).
    # A Python guard cost nothing of the budget: 3,600 of them ran within 2,000 steps, and
    # 2,000 regions under 2,000 guards took 2 s. Each guard now costs a node's steps.
    machine = _shared_guards(60, 60, "x &gt; 1", datamodel)
    state, _ = statifier.initialize(machine, session_id="s", limits=MacrostepLimits(steps=2_000))
    state, effects = statifier.handle_event(state, "e")
    (message,) = _errors(effects)
    assert "steps budget (2000) is exhausted" in message
    assert _exhausted(effects).reason == "steps"
    assert [event.name for event in state.internal_queue] == ["error.execution"]
    state, effects = statifier.handle_event(state, "go")  # a fresh budget
    assert not state.running


@pytest.mark.parametrize("datamodel", ["python", "ecmascript"])
def test_failing_guards_stop_at_the_internal_event_budget(datamodel: str) -> None:
    # A guard that fails raises error.execution; the queue's limit was checked only before
    # executable content, so 20 regions under 20 failing guards queued 400 errors past a
    # limit of 100, and the effects grew alike.
    machine = _shared_guards(20, 20, "missing &gt; 1", datamodel)
    limits = MacrostepLimits(internal_events=100)
    state, _ = statifier.initialize(machine, session_id="s", limits=limits)
    state, effects = statifier.handle_event(state, "e")
    assert len(state.internal_queue) == 101  # the limit, then the budget's own error
    errors = _errors(effects)
    assert len(errors) == 101
    assert "internal_events budget (100) is exhausted" in errors[-1]
    assert all("internal_events budget" not in message for message in errors[:-1])
    assert _exhausted(effects).reason == "internal_events"


def test_failing_guards_stop_at_the_effects_budget() -> None:
    machine = _shared_guards(20, 20, "missing &gt; 1", "python")
    state, _ = statifier.initialize(machine, session_id="s", limits=MacrostepLimits(effects=50))
    state, effects = statifier.handle_event(state, "e")
    errors = _errors(effects)
    assert len(errors) == 51
    assert "effects budget (50) is exhausted" in errors[-1]
    assert _exhausted(effects).reason == "effects"
    assert len(state.internal_queue) == 51


def test_output_bytes_are_budgeted_across_the_macrostep() -> None:
    machine = _chart(
        '<state id="s"><onentry><foreach array="list(range(100))" item="i">'
        '<send event="out" target="#_parent"><content expr="[\'x\' * 1000] * 100"/></send>'
        "</foreach></onentry></state>"
    )
    _, effects = statifier.initialize(
        machine, session_id="s", limits=MacrostepLimits(output_bytes=1_000_000)
    )
    sends = [e for e in effects if isinstance(e, fx.Send)]
    assert 5 <= len(sends) < 12
    assert _exhausted(effects).reason == "output_bytes"


def test_scripts_and_locations_spend_the_macrostep_budget() -> None:
    machine = _chart(
        '<state id="s"><onentry><foreach array="list(range(100))" item="i">'
        "<script>n = len([k for k in range(50000)])</script></foreach></onentry></state>",
        '<data id="n" expr="0"/>',
    )
    _, effects = statifier.initialize(
        machine, session_id="s", limits=MacrostepLimits(steps=1_000_000)
    )
    assert _exhausted(effects).reason == "steps"


def test_a_huge_delayexpr_is_refused_quickly() -> None:
    machine = _chart(
        '<state id="s"><onentry><send event="e" delayexpr="d"/></onentry></state>',
        f'<data id="d">{"9" * 999_990}ms</data>',
    )
    _, effects = statifier.initialize(machine, session_id="s")
    (message,) = _errors(effects)
    assert "longer than" in message
    assert len(message) < 500


@pytest.mark.parametrize("expr", ["1e308 * 10", "-1e308 * 10", "1e308 * 10 - 1e308 * 10"])
def test_nan_and_infinities_are_refused_where_they_enter_the_datamodel(expr: str) -> None:
    machine = _chart(
        f'<state id="s"><onentry><assign location="x" expr="{expr}"/></onentry></state>',
        '<data id="x" expr="0"/>',
    )
    state, effects = statifier.initialize(machine, session_id="s")
    assert state.datamodel["x"] == 0
    assert any("finite" in m for m in _errors(effects))
    dumps(state)


def test_memory_and_stack_exhaustion_never_leave_the_core(monkeypatch: pytest.MonkeyPatch) -> None:
    machine = _chart('<state id="s"><transition event="go" target="s"/></state>')
    state, _ = statifier.initialize(machine, session_id="s")
    for error in (MemoryError, RecursionError):

        def fail(self: Interpreter, *args: object, error: type[Exception] = error) -> None:
            raise error()

        with monkeypatch.context() as patch:
            patch.setattr(Interpreter, "do_microstep", fail)
            with pytest.raises(ExecutionResourceError):
                statifier.handle_event(state, "go")
    assert statifier.handle_event(state, "go")[0].running  # the state passed in is intact


def test_limits_are_kept_in_the_state_for_the_whole_execution() -> None:
    limits = MacrostepLimits(steps=200_000)
    machine = _chart(
        '<state id="s"><transition event="go" target="s">'
        '<foreach array="list(range(100000))" item="i"/></transition></state>'
    )
    state, _ = statifier.initialize(machine, session_id="s", limits=limits)
    assert state.limits == limits
    state, effects = statifier.handle_event(state, "go")
    assert _exhausted(effects).reason == "steps"


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError, match="steps must be an integer"):
        MacrostepLimits(steps=0)
    with pytest.raises(ValueError, match="effects must be an integer"):
        MacrostepLimits(effects=True)
