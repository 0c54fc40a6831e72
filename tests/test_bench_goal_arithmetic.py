"""``bench/goal_arithmetic.py``: what a speed-up of the Python event asks of the ECMAScript
event for issue 19's ratio to hold."""

from __future__ import annotations

import pytest

from bench.goal_arithmetic import companion_speedup


def test_a_ratio_below_its_floor_after_the_speed_up_asks_the_difference() -> None:
    # 1.24x faster Python event; ECMAScript at 0.49 of its events/s; floor 0.5.
    assert companion_speedup(1.24, 0.49, 0.5) == pytest.approx(0.5 * 1.24 / 0.49)


def test_a_ratio_that_stays_at_its_floor_asks_nothing() -> None:
    assert companion_speedup(1.2, 0.6, 0.5) == 1.0  # exactly at the floor: holds
    assert companion_speedup(1.0, 0.7, 0.5) == 1.0
    assert companion_speedup(1.2, 0.59, 0.5) > 1.0


@pytest.mark.parametrize("figures", [(0.0, 0.5, 0.5), (1.2, 0.0, 0.5), (1.2, 0.5, -1.0)])
def test_figures_that_are_no_measurement_are_refused(figures: tuple[float, float, float]) -> None:
    with pytest.raises(ValueError, match="positive"):
        companion_speedup(*figures)
