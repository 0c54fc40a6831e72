"""What one goal's speed-up asks of a ratio another goal holds (``bench/interpreter.py``).

The datamodel chart's goals against the peers ask statifier's event (the Python
datamodel's) to get faster; issue 19 holds the ECMAScript datamodel's event to at least
half the Python one's events per second. A speed-up of the Python event alone lowers
that ratio by as much, so the bench says how much faster the ECMAScript event must get
too for both goals to hold: the measurement that shows why they are not met together.
"""

from __future__ import annotations


def companion_speedup(speedup: float, ratio: float, floor: float) -> float:
    """How many times faster another row must get, once ours gets ``speedup`` times
    faster, for ``ratio`` (its events/s over ours, as measured) to stay at ``floor`` or
    above: 1.0 when it would without getting faster.

    Raises ``ValueError`` for a figure that is not positive (no such measurement)."""
    if speedup <= 0 or ratio <= 0 or floor <= 0:
        raise ValueError(f"speed-ups and ratios are positive: {speedup}, {ratio}, {floor}")
    needed = floor * speedup / ratio
    return needed if needed > 1.0 else 1.0
