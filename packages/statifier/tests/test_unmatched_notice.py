"""The notice for an external event no transition took (``statifier.chart.matching``).

A durable step writes it for every such event, with the execution's row locked, and the
event's name comes from whoever sends it: its cost must not grow with the chart past the
events the active states accept, nor with the name's length past ``HINT_NAME_LENGTH``.
"""

from __future__ import annotations

import statifier
from statifier import MachineState
from statifier.chart.matching import unmatched_notice
from statifier.suggest import HINT_NAME_LENGTH, INDEXED_LENGTH, LIKENESS_CANDIDATES

from engine_support.counting import python_steps

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="null"'


def _regions(events: list[str], elsewhere: str = "elsewhere") -> MachineState:
    """A parallel state of one region per event, each taking its event, and a state
    ``other`` (never active) taking ``elsewhere``."""
    regions = "".join(
        f'<state id="r{i}"><transition event="{event}"/></state>' for i, event in enumerate(events)
    )
    chart = (
        f'<scxml {NS} initial="p"><parallel id="p">{regions}</parallel>'
        f'<state id="other"><transition event="{elsewhere}"/></state></scxml>'
    )
    state, _ = statifier.initialize(statifier.compile(chart), session_id="notice")
    return state


def _notice(state: MachineState, name: str) -> str:
    return unmatched_notice(state.machine, name, state.configuration)


def _names(count: int) -> list[str]:
    return [f"order.line{i:04d}.shipped" for i in range(count)]


def test_a_name_a_transition_elsewhere_takes() -> None:
    notice = _notice(_regions(_names(3)), "elsewhere")
    assert notice.startswith(
        "no transition matched external event 'elsewhere': the active states take no such event"
    )


def test_likeness_up_to_the_candidate_limit_then_one_edit_only() -> None:
    # Two edits from a name the states accept: likeness finds it, the index of names one
    # edit away does not.
    names = _names(LIKENESS_CANDIDATES)
    two_edits = "ordr.line0007.shiped"
    assert _notice(_regions(names), two_edits).endswith("; did you mean 'order.line0007.shipped'?")
    many = _regions([*names, "zzz"])
    assert "did you mean" not in _notice(many, two_edits)
    assert _notice(many, "order.line0007.shiped").endswith(
        "; did you mean 'order.line0007.shipped'?"
    )


def test_no_hint_for_a_name_past_the_length_limit() -> None:
    known = "e" * HINT_NAME_LENGTH
    state = _regions([known])
    assert _notice(state, known[:-1] + "x").endswith(f"; did you mean {known!r}?")
    assert "did you mean" not in _notice(state, known + "x")


def test_past_the_likeness_limit_names_up_to_the_indexed_length_are_offered() -> None:
    for length, offered in ((INDEXED_LENGTH, True), (INDEXED_LENGTH + 1, False)):
        known = "e" * length
        state = _regions([known, *_names(LIKENESS_CANDIDATES)])
        assert ("did you mean" in _notice(state, known[:-1] + "x")) is offered, length


def test_the_notice_costs_no_more_in_a_larger_chart() -> None:
    def steps(regions: int) -> tuple[int, int]:
        state = _regions(_names(regions))
        typo = "ordr.line0007.shipped"
        _notice(state, typo)  # the chart's indexes, made once per machine
        anywhere = python_steps(lambda: unmatched_notice(state.machine, typo))
        active = python_steps(lambda: _notice(state, typo))
        return anywhere, active

    small_anywhere, small_active = steps(500)
    large_anywhere, large_active = steps(2000)
    # Without a configuration the notice reads no list of the chart's events.
    assert large_anywhere <= 1.2 * small_anywhere
    # With one it reads the events the active states accept (four times as many), once.
    assert large_active <= 5 * small_active


def test_long_names_are_not_compared_one_by_one() -> None:
    # Past the likeness limit only the index is read: names over INDEXED_LENGTH, which it
    # leaves out, are not compared with the unmatched name one by one (they were, at
    # 3.6 times the notice's work here).
    def steps(width: int) -> int:
        names = [name.ljust(width, "x") for name in _names(2000)]
        state = _regions(names)
        typo = names[7].replace("order", "ordr", 1)
        _notice(state, typo)
        return python_steps(lambda: _notice(state, typo))

    assert steps(INDEXED_LENGTH + 36) <= 1.2 * steps(20)
