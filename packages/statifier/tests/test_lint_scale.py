"""Lint on big charts: findings as the rules have them, work in proportion to the chart."""

from __future__ import annotations

import pytest
import statifier
from hypothesis import given, settings
from hypothesis import strategies as st
from statifier import suggest
from statifier.chart import lint as lint_module
from statifier.chart.lint import lint
from statifier.core.events import name_matches
from statifier.suggest import HINT_NAME_LENGTH

from engine_support.counting import python_steps

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'

# -- dead transitions, against the rule spelled out ------------------------------------

_DESCRIPTOR = st.sampled_from(["a", "a.b", "a.*", "a.b.*", "b", "*", ".*", "a.", "b.a"])
_TRANSITION = st.tuples(st.lists(_DESCRIPTOR, max_size=2, unique=True), st.booleans())


def _covers(descriptors: tuple[str, ...], descriptor: str) -> bool:
    """Every event ``descriptor`` matches is matched by one of ``descriptors``."""
    if descriptor in ("*", ".*"):
        return any(d in ("*", ".*") for d in descriptors)
    stem = descriptor[:-2] if descriptor.endswith(".*") else descriptor.rstrip(".")
    return name_matches(descriptors, stem)


def _first_winner(
    transitions: list[tuple[list[str], bool]], position: int
) -> tuple[list[str], bool] | None:
    """The first unconditional transition before ``position`` that always wins over it."""
    events = transitions[position][0]
    for other_events, guarded in transitions[:position]:
        if guarded:
            continue
        if not events and not other_events:
            return other_events, guarded
        if events and other_events and all(_covers(tuple(other_events), d) for d in events):
            return other_events, guarded
    return None


@settings(max_examples=300, deadline=None)
@given(st.lists(_TRANSITION, min_size=1, max_size=7))
def test_dead_transitions_are_those_an_earlier_unconditional_one_always_wins_over(
    transitions: list[tuple[list[str], bool]],
) -> None:
    lines = [
        f"<transition{f' event={chr(34)}{" ".join(events)}{chr(34)}' if events else ''}"
        f'{" cond=" + chr(34) + "x" + chr(34) if guarded else ""} target="b"/>'
        for events, guarded in transitions
    ]
    source = (
        f'<scxml {NS} datamodel="ecmascript"><datamodel><data id="x" expr="true"/></datamodel>'
        f'<state id="a">\n' + "\n".join(lines) + '\n</state><state id="b"/></scxml>'
    )
    found = {
        d.line: d.message
        for d in lint(statifier.compile(source))
        if d.code == "dead-transition" and "comes first" in d.message
    }
    expected = {}
    for position in range(len(transitions)):
        winner = _first_winner(transitions, position)
        if winner is not None:
            expected[position + 2] = transitions.index(winner) + 2
    assert set(found) == set(expected), (transitions, found)
    for line, winner_line in expected.items():
        assert f"on line {winner_line}" in found[line], (transitions, found[line])


# -- work in proportion to the chart -----------------------------------------------------


def _events_chart(count: int) -> statifier.Machine:
    """``count`` states, each raising an event the next waits for, and waiting for one
    nothing raises; one state with ``count`` transitions, each on an event of its own."""
    states = "".join(
        f'<state id="s{i}"><onentry><raise event="ev{i}"/></onentry>'
        f'<transition event="ev{(i + 1) % count}" target="s{(i + 1) % count}"/>'
        f'<transition event="go.{i}.*" target="{"wide" if i == 0 else "s0"}"/></state>'
        for i in range(count)
    )
    own = "".join(f'<transition event="e{i}.x" target="s0"/>' for i in range(count))
    return statifier.compile(f'<scxml {NS}>{states}<state id="wide">{own}</state></scxml>')


def test_lint_of_a_chart_of_many_events_takes_steps_in_near_linear_proportion(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each waited event was compared with every raised one, each transition of a state
    # with every one before it, and each "did you mean" read every name (100 s at 2,000
    # states). Hints stop at their budget (the next test), so they are left out here.
    monkeypatch.setattr(lint_module, "HINT_BUDGET", 0)
    few = _events_chart(100)
    many = _events_chart(400)
    small = python_steps(lambda: lint(few))
    large = python_steps(lambda: lint(many))
    assert large <= 5 * small, (small, large)


def test_hints_stop_at_the_budget_and_the_findings_do_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each of the 100 waited "go.N.*" and "eN.x" is external, and its hint reads 202
    # names (the 50 raised, 3 platform errors, the 149 other waited): a budget of 10
    # hints' reading gives the first 10 a hint, one less gives 9, and all 100 are
    # reported (the default budget reads 20,000 names: 99 hints here).
    machine = _events_chart(50)
    monkeypatch.setattr(lint_module, "HINT_BUDGET", 100 * 202)
    every = [d for d in lint(machine) if d.code == "external-event"]
    monkeypatch.setattr(lint_module, "HINT_BUDGET", 10 * 202)
    budgeted = [d for d in lint(machine) if d.code == "external-event"]
    monkeypatch.setattr(lint_module, "HINT_BUDGET", 10 * 202 - 1)
    short = [d for d in lint(machine) if d.code == "external-event"]
    assert len(every) == len(budgeted) == len(short) == 100
    assert sum("did you mean" in d.message for d in every) == 100
    assert sum("did you mean" in d.message for d in budgeted) == 10
    assert sum("did you mean" in d.message for d in short) == 9


def _hint_for_a_name_of(length: int) -> bool:
    """Whether a misspelt variable name ``length`` characters long gets a hint."""
    declared = "v" * (length - 1) + "a"
    misspelt = "v" * (length - 1) + "b"
    source = (
        f'<scxml {NS} datamodel="python"><datamodel><data id="{declared}" expr="1"/>'
        f'</datamodel><state id="s"><onentry><log expr="{misspelt}"/></onentry></state></scxml>'
    )
    (found,) = [d for d in lint(statifier.compile(source)) if d.code == "undefined-name"]
    return f"did you mean {declared!r}" in found.message


def test_names_up_to_the_hint_length_get_hints() -> None:
    assert _hint_for_a_name_of(HINT_NAME_LENGTH)
    assert not _hint_for_a_name_of(HINT_NAME_LENGTH + 1)


def _scripts_chart(count: int) -> statifier.Machine:
    """``count`` ECMAScript scripts, one a line, each declaring a ``let`` of its own: the
    first script's is read by a condition, the second's by the last script."""
    scripts = "\n".join(
        f"<onentry><script>let a{i} = {i};</script></onentry>" for i in range(count - 1)
    )
    return statifier.compile(
        f'<scxml {NS} datamodel="ecmascript"><state id="s">\n{scripts}\n'
        "<onentry><script>let last = a1;</script></onentry>\n"
        '<transition cond="a0 &gt; 0" target="s"/></state></scxml>'
    )


def test_script_locals_read_elsewhere_are_found_in_proportion_to_the_chart() -> None:
    # For each script, every other read set of the chart was gathered and searched for
    # each name it declares: 8,000 scripts took 80 s.
    few = _scripts_chart(100)
    many = _scripts_chart(400)
    small = python_steps(lambda: lint(few))
    large = python_steps(lambda: lint(many))
    assert large <= 4.5 * small, (small, large)
    found = [d for d in lint(_scripts_chart(5)) if d.code == "script-local"]
    assert [(d.line, d.message.split("'")[1]) for d in found] == [(2, "a0"), (3, "a1")]


def _long_names_chart(count: int) -> statifier.Machine:
    """``count`` raised and ``count`` waited event names of 76 characters, alike in all
    but their last few: each waited one is external, a candidate for a hint and for a
    near spelling among the long names."""
    stem = "x" * 70
    raised = "".join(f'<raise event="{stem}r{i:05d}"/>' for i in range(count))
    waited = "".join(f'<transition event="{stem}w{i:05d}" target="a"/>' for i in range(count))
    return statifier.compile(
        f'<scxml {NS} datamodel="python" initial="a"><state id="a"><onentry>{raised}'
        f"</onentry>{waited}</state></scxml>"
    )


def test_lint_of_many_long_names_alike_takes_steps_in_near_linear_proportion() -> None:
    # Each hint counted one a name, whatever its length (a comparison of two names of 76
    # characters costs about 20 of two short ones), and each waited long name was compared
    # with every raised one: 1,000 of each took 19 s.
    few = _long_names_chart(100)
    many = _long_names_chart(400)
    small = python_steps(lambda: lint(few))
    large = python_steps(lambda: lint(many))
    assert large <= 5 * small, (small, large)
    # Each waited name is one edit from a raised one ("w" for "r"): those whose lookups fit
    # the long names' budget are found as such, the rest are reported all the same.
    codes = [d.code for d in lint(many)]
    assert codes.count("misspelled-event") == suggest.LONG_COMPARISONS // 400
    assert codes.count("misspelled-event") + codes.count("external-event") == 400


def test_a_hint_costs_its_character_pairs_and_a_refused_one_spends_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sixteen = ["a" * 15 + c for c in "bcd"]  # 16 x 16 characters: one each
    name = "a" * 15 + "e"
    monkeypatch.setattr(lint_module, "HINT_BUDGET", 3)
    hints = lint_module._Hints()
    assert hints.did_you_mean(name, sixteen).startswith("; did you mean")
    assert hints.left == 0
    longer = name + "f"  # 17 x 16 = 272 pairs: two each
    monkeypatch.setattr(lint_module, "HINT_BUDGET", 6)
    hints = lint_module._Hints()
    assert hints.did_you_mean(longer, sixteen).startswith("; did you mean")
    assert hints.left == 0
    monkeypatch.setattr(lint_module, "HINT_BUDGET", 5)
    hints = lint_module._Hints()
    assert hints.did_you_mean(longer, sixteen) == ""
    assert hints.left == 0  # spent: the next hint, however cheap, gets none
    assert hints.did_you_mean("b", ["c"]) == ""


def test_long_names_are_compared_one_by_one_up_to_their_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    long = ["y" * 70 + "a", "y" * 70 + "b"]
    monkeypatch.setattr(suggest, "LONG_COMPARISONS", 4)
    spellings = suggest.NearSpellings(long)
    near = "y" * 70 + "c"
    assert spellings.of(near) == long  # two compared: two left
    assert spellings.of(near) == long  # two more: none left
    assert spellings.of(near) == []  # only the index now
    assert spellings.of("y" * 70 + "d", unindexed=True) == []
