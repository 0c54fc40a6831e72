"""statifier_oban: delayed sends and invocations that outlive the process, as Oban jobs.

Importing the package installs prompt staging for Oban instances built afterwards (see
``statifier_oban.latency``).
"""

from __future__ import annotations

from . import latency, telemetry
from ._config import Config
from ._errors import (
    ConfigError,
    InvalidScope,
    MissingOrdinal,
    MissingSendId,
    NonSelfTarget,
    ScheduleRejected,
    StatifierObanError,
    StoreUnavailable,
)
from ._timer import TimerJob, cancel, pending_for, schedule
from .delivery import Delivered, Delivery, Discarded, Snooze, fired_event

latency.install()

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
    "cancel",
    "fired_event",
    "pending_for",
    "schedule",
    "telemetry",
]
