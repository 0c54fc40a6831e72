"""Work counted, not timed: what a test holds to a proportion of a chart's size."""

from __future__ import annotations

import sys
from collections.abc import Callable


def python_steps(action: Callable[[], object]) -> int:
    """The lines of Python ``action`` runs and the loop turns it takes (``sys.monitoring``'s
    LINE and JUMP events): a count of its work that the machine's speed does not move."""
    monitoring = sys.monitoring
    events = (monitoring.events.LINE, monitoring.events.JUMP)
    tool = next(i for i in range(6) if monitoring.get_tool(i) is None)
    steps = 0

    def seen(*_: object) -> None:
        nonlocal steps
        steps += 1

    monitoring.use_tool_id(tool, "statifier steps counted")
    try:
        for event in events:
            monitoring.register_callback(tool, event, seen)
        monitoring.set_events(tool, events[0] | events[1])
        try:
            action()
        finally:
            monitoring.set_events(tool, 0)
    finally:
        for event in events:
            monitoring.register_callback(tool, event, None)
        monitoring.free_tool_id(tool)
    return steps
