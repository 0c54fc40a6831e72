"""statifier: a W3C SCXML engine with a pure, deterministic interpreter core.

``compile`` a chart once into an immutable ``Machine``; drive it with ``initialize``,
``handle_event``, ``deliver_internal`` and ``cancel``, each of which returns the new
``MachineState`` and the ordered list of effects (``statifier.core.effects``) for a driver
to perform. The core never does I/O. Charts are SCXML text, or written in Python with
``statifier.build`` (``export`` writes such a chart as SCXML).
"""

from __future__ import annotations

from importlib import metadata as _metadata

from statifier.build import export
from statifier.chart.compiler import Resolver
from statifier.chart.compiler import compile_chart as compile
from statifier.chart.identity import chart_identity
from statifier.chart.model import Machine
from statifier.core import effects, position
from statifier.core.algorithm import (
    DEFAULT_MAX_MACROSTEP_ROUNDS,
    cancel,
    deliver_internal,
    handle_event,
    initialize,
)
from statifier.core.events import SCXML_EVENT_PROCESSOR, Event, external
from statifier.core.state import MachineState
from statifier.errors import ChartError, Diagnostic, NotRunningError, PositionError, StatifierError
from statifier.ids import new_session_id

try:
    __version__ = _metadata.version("statifier")
    """The installed distribution's version (the one in ``pyproject.toml``)."""
except _metadata.PackageNotFoundError:  # pragma: no cover - running from a bare source tree
    __version__ = "0+unknown"

__all__ = [
    "DEFAULT_MAX_MACROSTEP_ROUNDS",
    "SCXML_EVENT_PROCESSOR",
    "ChartError",
    "Diagnostic",
    "Event",
    "Machine",
    "MachineState",
    "NotRunningError",
    "PositionError",
    "Resolver",
    "StatifierError",
    "__version__",
    "cancel",
    "chart_identity",
    "compile",
    "deliver_internal",
    "effects",
    "export",
    "external",
    "handle_event",
    "initialize",
    "new_session_id",
    "position",
]
