"""The console's chart drawings: ``statifier.chart.diagram.to_svg`` run off the event
loop, a few at a time, remembered per chart revision and configuration.

Graphviz is a separate install: without ``dot`` the console shows the active states as a
list instead (``available`` is False) and says how to get it.
"""

from __future__ import annotations

import asyncio
import shutil
from collections import OrderedDict
from typing import Final

from statifier.chart.diagram import DiagramError, to_svg
from statifier.chart.model import Machine

CACHED_DRAWINGS: Final = 256
"""Drawings kept (by chart identity and configuration); the least recently used goes."""

CONCURRENT_DRAWINGS: Final = 2
"""Graphviz processes running at once (the rest wait their turn)."""


class Diagrams:
    """Draws charts with their active states highlighted (see the module docstring)."""

    def __init__(self, timeout: float) -> None:
        self._timeout = timeout
        self._cache: OrderedDict[tuple[str, frozenset[int]], bytes] = OrderedDict()
        self._turns = asyncio.Semaphore(CONCURRENT_DRAWINGS)

    @property
    def available(self) -> bool:
        """Whether Graphviz's ``dot`` is on the path."""
        return shutil.which("dot") is not None

    async def svg(self, machine: Machine, active: frozenset[int]) -> bytes:
        """The chart drawn with ``active`` highlighted (``DiagramError`` if it cannot be)."""
        key = (machine.identity, active)
        drawn = self._cache.get(key)
        if drawn is not None:
            self._cache.move_to_end(key)
            return drawn
        async with self._turns:
            drawn = await asyncio.to_thread(to_svg, machine, active, timeout=self._timeout)
        self._cache[key] = drawn
        while len(self._cache) > CACHED_DRAWINGS:
            self._cache.popitem(last=False)
        return drawn


__all__ = ["DiagramError", "Diagrams"]
