"""A deep history of a wide ``<parallel>``, entered again, in work that grows with the
regions it recorded, not with their square (ADR 37)."""

from __future__ import annotations

import dataclasses

import statifier

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'


class Compared(int):
    """A state index that counts how often it is compared for equality: the work of
    membership tests done in C, which no count of Python lines sees."""

    count = 0

    def __eq__(self, other: object) -> bool:
        Compared.count += 1
        return int(self) == other

    __hash__ = int.__hash__


def _comparisons_entering_again(regions: int) -> int:
    """The comparisons of recorded states while ``back`` enters the parallel of
    ``regions`` regions again through its deep history, the regions checked active."""
    body = "".join(f'<state id="r{i}"/>' for i in range(regions))
    machine = statifier.compile(
        f'<scxml {NS} datamodel="null" initial="top"><state id="top"><parallel id="p">'
        f'<history id="h" type="deep"/>{body}</parallel><transition event="out" target="o"/>'
        '</state><state id="o"><transition event="back" target="h"/></state></scxml>'
    )
    state, _ = statifier.initialize(machine, session_id="s")
    state, _ = statifier.handle_event(state, "out")
    ((history, recorded),) = state.history.items()
    assert len(recorded) == regions
    state = dataclasses.replace(
        state, history={history: tuple(Compared(index) for index in recorded)}
    )
    Compared.count = 0
    state, _ = statifier.handle_event(state, "back")
    assert state.is_active("r0")
    assert state.is_active(f"r{regions - 1}")
    return Compared.count


def test_a_deep_history_of_many_regions_is_entered_again_in_linear_work() -> None:
    # Its effective targets were deduplicated by a list's membership test, twice a step:
    # 20,200 comparisons at 100 regions, 5.3 s a step at 19,000; now four a region.
    for regions in (100, 400):
        assert _comparisons_entering_again(regions) <= 8 * regions
