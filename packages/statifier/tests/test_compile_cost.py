"""Compiling costs a bounded amount per character of code (issue 18).

300 distinct 9 KB conditions once took 10-13 s and 383 MB to compile. A chart's code
(expressions, locations, scripts) is now bounded in all (``MAX_CODE_LENGTH``, a typed
``too-much-code`` refusal before the code past it is parsed), an attribute chain is
walked once rather than once per link, and the cyclic collector, whose full passes over
everything the compile had allocated tripled its time, rests while a chart compiles. A
"did you mean" for a wrong target is looked up among the state ids one edit away once
there are more than ``suggest.LIKENESS_CANDIDATES`` of them (ADR 37's amendment).
How long a chart at the limits takes is measured, not asserted: see the report of
issue 18 (every shape of dense code under 0.6 s of CPU).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
import statifier
from statifier import suggest
from statifier.chart import compiler
from statifier.datamodel.python import compile_expression, specialised
from statifier.datamodel.python import compiler as expression_compiler
from statifier.errors import ChartError

from engine_support.counting import python_steps

NS = 'xmlns="http://www.w3.org/2005/07/scxml"'


def with_conditions(lengths: list[int], after: str = "") -> str:
    """A chart whose only code is one condition of each length (cheap string literals),
    then ``after`` (more conditions, written as they are)."""
    conditions = [f"'{'a' * (length - 2)}'" for length in lengths]
    transitions = "".join(
        f'<transition event="e{i}" cond="{cond}" target="b"/>' for i, cond in enumerate(conditions)
    )
    return (
        f'<scxml {NS} initial="a"><state id="a">{transitions}{after}</state><state id="b"/></scxml>'
    )


def lengths_summing_to(total: int) -> list[int]:
    """Condition lengths (each within the per-expression limit) summing to ``total``."""
    full, rest = divmod(total, 10_000)
    return [10_000] * full + ([rest] if rest else [])


def test_a_chart_with_code_up_to_the_limit_compiles() -> None:
    lengths = lengths_summing_to(compiler.MAX_CODE_LENGTH)
    machine = statifier.compile(with_conditions(lengths))
    conditions = [t.cond for t in machine.transitions if t.cond is not None]
    assert [len(cond.source) for cond in conditions] == lengths


def test_one_character_of_code_past_the_limit_is_refused_before_it_is_parsed() -> None:
    # The condition after the limit is not even valid: it is never parsed.
    over = with_conditions(
        lengths_summing_to(compiler.MAX_CODE_LENGTH - 1),
        after='<transition event="late" cond="((" target="b"/>',
    )
    with pytest.raises(ChartError) as caught:
        statifier.compile(over)
    [diagnostic] = caught.value.diagnostics
    assert diagnostic.code == "too-much-code"
    assert diagnostic.message == (
        f"the chart's expressions and scripts are over {compiler.MAX_CODE_LENGTH} characters in all"
    )
    assert compiler.MAX_CODE_LENGTH == 256 * 1024


def test_scripts_and_locations_count_as_code() -> None:
    script = "x = 1\n" * 16_666  # 99,996 characters: each script within its own bound
    assigns = f'<assign location="{"y" * 9_000}" expr="1"/>' * 7  # the 7th goes over
    chart = (
        f'<scxml {NS} initial="a"><datamodel><data id="x" expr="0"/></datamodel>'
        f'<state id="a"><onentry><script>{script}</script><script>{script}</script>{assigns}'
        "</onentry></state></scxml>"
    )
    statifier.compile(chart.replace(assigns, assigns[: len(assigns) // 7 * 6]))
    with pytest.raises(ChartError) as caught:
        statifier.compile(chart)
    assert [d.code for d in caught.value.diagnostics] == ["too-much-code"]


def test_a_chain_of_attributes_is_walked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every link of ``x.a.a...a`` once built a path reader of its own, walking the chain
    down to ``x``: quadratic in the chain's length (257 KB of chains took 3.6 s)."""
    built: list[tuple[str, ...]] = []
    real = specialised.path_read

    def counting(root: str, keys: tuple[str, ...], general: object) -> object:
        built.append(keys)
        return real(root, keys, general)  # type: ignore[arg-type]

    monkeypatch.setattr(expression_compiler, "path_read", counting)
    chain = compile_expression("x" + ".a" * 40 + " == 1")
    assert built == [("a",) * 40]
    value: object = 1
    for _ in range(40):
        value = {"a": value}
    assert chain.evaluate({"x": value}, lambda _state: False) is True
    subscripts = compile_expression("x" + "['a']" * 3 + ".a")
    assert built[-1] == ("a", "a", "a", "a")
    nested = {"x": {"a": {"a": {"a": {"a": 7}}}}}
    assert subscripts.evaluate(nested, lambda _state: False) == 7


@pytest.fixture
def collector_state() -> Iterator[None]:
    """Put the collector back as it was."""
    enabled = gc.isenabled()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        else:
            gc.disable()


@pytest.mark.usefixtures("collector_state")
@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_rests_while_a_chart_compiles_and_is_restored_after(enabled: bool) -> None:
    seen: list[bool] = []

    def resolver(uri: str) -> str:
        seen.append(gc.isenabled())
        return "x = 1"

    chart = (
        f'<scxml {NS}><datamodel><data id="x" expr="0"/></datamodel>'
        '<state id="a"><onentry><script src="s.py"/></onentry></state></scxml>'
    )
    if enabled:
        gc.enable()
    else:
        gc.disable()
    statifier.compile(chart, resolver=resolver)
    assert seen == [False]
    assert gc.isenabled() is enabled
    with pytest.raises(ChartError):
        statifier.compile("<scxml/>", resolver=resolver)
    assert gc.isenabled() is enabled


def _wrong_targets(states: int, wrong: list[str]) -> str:
    ids = "".join(f'<state id="state.number{i:05d}"/>' for i in range(states))
    transitions = "".join(f'<transition event="e" target="{target}"/>' for target in wrong)
    return f'<scxml {NS}><state id="first">{transitions}</state>{ids}</scxml>'


def _refusal(source: str) -> str:
    with pytest.raises(ChartError) as refused:
        statifier.compile(source)
    return str(refused.value)


def test_hints_for_wrong_targets_cost_the_same_however_many_there_are() -> None:
    # Each wrong target was compared with every state id: 200 of them in a chart of
    # 20,000 states took minutes. Past 100 ids, the ids one edit away are looked up.
    def steps(wrong: int) -> int:
        targets = [f"state.numbr{i:05d}" for i in range(wrong)]
        return python_steps(lambda: _refusal(_wrong_targets(2000, targets)))

    assert steps(40) <= 1.5 * steps(1)


def test_a_wrong_target_among_many_states_gets_a_hint_one_edit_away() -> None:
    many = suggest.LIKENESS_CANDIDATES + 1
    assert "did you mean 'state.number00007'?" in _refusal(
        _wrong_targets(many, ["state.numbr00007"])
    )
    # Two edits away: likeness would find it among fewer ids, the lookup does not.
    assert "did you mean" not in _refusal(_wrong_targets(many, ["stat.numbr00007"]))
    assert "did you mean 'state.number00007'?" in _refusal(
        _wrong_targets(suggest.LIKENESS_CANDIDATES - 1, ["stat.numbr00007"])
    )
