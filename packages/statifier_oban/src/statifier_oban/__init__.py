"""statifier_oban: delayed sends and invocations that outlive the process, as Oban jobs.

Importing the package installs prompt staging for Oban instances built afterwards (see
``statifier_oban.latency``).
"""

from __future__ import annotations

from importlib import metadata as _metadata

from . import latency, telemetry
from .config import Config
from .delivery import Delivered, Delivery, Discarded, Snooze, fired_event
from .errors import (
    ConfigError,
    InvalidScope,
    MissingOrdinal,
    MissingSendId,
    NonSelfTarget,
    ScheduleRejected,
    StatifierObanError,
    StoreUnavailable,
)
from .timer import TimerJob, cancel, pending_for, schedule

latency.install()

try:
    __version__ = _metadata.version("statifier-oban")
    """The installed distribution's version (the one in ``pyproject.toml``)."""
except _metadata.PackageNotFoundError:  # pragma: no cover - running from a bare source tree
    __version__ = "0+unknown"

__all__ = [
    "Config",
    "ConfigError",
    "Delivered",
    "Delivery",
    "Discarded",
    "InvalidScope",
    "MissingOrdinal",
    "MissingSendId",
    "NonSelfTarget",
    "ScheduleRejected",
    "Snooze",
    "StatifierObanError",
    "StoreUnavailable",
    "TimerJob",
    "__version__",
    "cancel",
    "fired_event",
    "pending_for",
    "schedule",
    "telemetry",
]
