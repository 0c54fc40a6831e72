"""statifier_oban: delayed sends and invocations that outlive the process, as Oban jobs.

Everything a host uses is importable from here. The public modules beside it are
``statifier_oban.delivery`` (the default deliveries, whose import paths are stored on job
rows), ``statifier_oban.workers`` (the oban workers, whose import paths are the rows'
``worker``), ``statifier_oban.schema`` (the schema installer), ``statifier_oban.telemetry``
(event names), ``statifier_oban.latency`` (prompt staging), ``statifier_oban.embedded``
(a throwaway PostgreSQL, extra ``statifier-oban[embedded]``), ``statifier_oban.executions``
(durable executions on oban jobs: the executor and the deliveries, extra
``statifier-oban[persistence]``; its job rows name its deliveries) and
``statifier_oban.cli`` (the ``statifier-oban`` command). Modules with a leading
underscore are private.

Importing the package installs prompt staging for Oban instances built afterwards (see
``statifier_oban.latency``).
"""

from __future__ import annotations

from importlib import metadata as _metadata

from . import latency, telemetry
from ._config import Config
from ._errors import (
    CodecFailed,
    ConfigError,
    DataDirectoryInUse,
    DuplicateOrdinal,
    EmbeddedPostgresMissing,
    FanOutError,
    HandlerNotConfigured,
    InvalidDelivery,
    InvalidHandler,
    InvalidHandlerClass,
    InvalidPrefix,
    InvalidRunAnswer,
    InvalidScope,
    InvalidTarget,
    InvocationTimeout,
    LeaseHeld,
    LeaseLost,
    MissingOrdinal,
    MissingSendId,
    NoExecutions,
    NonSelfTarget,
    OpaqueValueError,
    ResolutionError,
    RunFailed,
    ScheduleRejected,
    SchemaError,
    StatementError,
    StatifierObanError,
    StoreUnavailable,
    UndecodableRow,
    ValueRefused,
)
from ._handler import Deferred, Error, FanOut, InvokeHandler, Ok, RunContext, RunResult
from ._host import DurableTimers, session_lease, start_session
from ._lease import SessionLease
from ._opaque import MAX_OPAQUE_BYTES
from ._plugins import ChildStarter, OpaqueCodec
from ._resolve import register as register_plugin
from ._timer import TimerJob, cancel_timers, pending_for, schedule, schedule_many
from .delivery import (
    Delivered,
    DeliveryAnswer,
    Discarded,
    InvokeDelivery,
    SessionDelivery,
    SessionInvokeDelivery,
    Snoozed,
    TimerDelivery,
)

latency.install()

try:
    __version__ = _metadata.version("statifier-oban")
    """The installed distribution's version (the one in ``pyproject.toml``)."""
except _metadata.PackageNotFoundError:  # pragma: no cover - running from a bare source tree
    __version__ = "0+unknown"

__all__ = [
    "MAX_OPAQUE_BYTES",
    "ChildStarter",
    "CodecFailed",
    "Config",
    "ConfigError",
    "DataDirectoryInUse",
    "Deferred",
    "Delivered",
    "DeliveryAnswer",
    "Discarded",
    "DuplicateOrdinal",
    "DurableTimers",
    "EmbeddedPostgresMissing",
    "Error",
    "FanOut",
    "FanOutError",
    "HandlerNotConfigured",
    "InvalidDelivery",
    "InvalidHandler",
    "InvalidHandlerClass",
    "InvalidPrefix",
    "InvalidRunAnswer",
    "InvalidScope",
    "InvalidTarget",
    "InvocationTimeout",
    "InvokeDelivery",
    "InvokeHandler",
    "LeaseHeld",
    "LeaseLost",
    "MissingOrdinal",
    "MissingSendId",
    "NoExecutions",
    "NonSelfTarget",
    "Ok",
    "OpaqueCodec",
    "OpaqueValueError",
    "ResolutionError",
    "RunContext",
    "RunFailed",
    "RunResult",
    "ScheduleRejected",
    "SchemaError",
    "SessionDelivery",
    "SessionInvokeDelivery",
    "SessionLease",
    "Snoozed",
    "StatementError",
    "StatifierObanError",
    "StoreUnavailable",
    "TimerDelivery",
    "TimerJob",
    "UndecodableRow",
    "ValueRefused",
    "__version__",
    "cancel_timers",
    "pending_for",
    "register_plugin",
    "schedule",
    "schedule_many",
    "session_lease",
    "start_session",
    "telemetry",
]
