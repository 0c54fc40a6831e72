"""statifier_oban: delayed sends and invocations that outlive the process, as Oban jobs.

Everything a host uses is importable from here. The public modules beside it are
``statifier_oban.delivery`` (the default deliveries, whose import paths are stored on job
rows), ``statifier_oban.workers`` (the oban workers, whose import paths are the rows'
``worker``), ``statifier_oban.schema`` (the schema installer), ``statifier_oban.telemetry``
(event names), ``statifier_oban.latency`` (prompt staging), ``statifier_oban.embedded``
(a throwaway PostgreSQL, extra ``statifier-oban[embedded]``), ``statifier_oban.executions``
(durable executions on oban jobs: the executor and the deliveries, extra
``statifier-oban[persistence]``; its job rows name its deliveries),
``statifier_oban.testing`` (durable executions under test on a clock the test moves, and
the pytest fixtures; extra ``statifier-oban[testing]``) and ``statifier_oban.cli`` (the
``statifier-oban`` command). Modules with a leading underscore are private.

The code is in subpackages, one per part a reader looks for: ``timers`` (durable timers
for live sessions), ``invocations`` (invocations and fan-out), ``executions`` (the
adapters to durable executions), ``rows`` (job rows read as untrusted input: the plug-ins
they name, the fields they hold), ``store`` (the oban seam: compat, SQL, schema) and
``cli``. The public modules above keep their paths: job rows store some of them.

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
    KeptPostgresError,
    LeaseHeld,
    LeaseLost,
    MissingOrdinal,
    MissingSendId,
    NoExecutions,
    NonSelfTarget,
    OpaqueValueError,
    PostFailedAgain,
    ResolutionError,
    RunFailed,
    ScheduleRejected,
    SchemaError,
    SessionIdNotFree,
    StatementError,
    StatifierObanError,
    StoreUnavailable,
    TracingUnavailable,
    UndecodableRow,
    ValueRefused,
)
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
from .invocations._handler import Deferred, Error, FanOut, InvokeHandler, Ok, RunContext, RunResult
from .rows._opaque import MAX_OPAQUE_BYTES
from .rows._plugins import ChildStarter, OpaqueCodec
from .rows._resolve import register as register_plugin
from .timers._host import DurableTimers, session_lease, start_session
from .timers._lease import SessionLease
from .timers._schedule import TimerJob, cancel_timers, pending_for, schedule, schedule_many

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
    "KeptPostgresError",
    "LeaseHeld",
    "LeaseLost",
    "MissingOrdinal",
    "MissingSendId",
    "NoExecutions",
    "NonSelfTarget",
    "Ok",
    "OpaqueCodec",
    "OpaqueValueError",
    "PostFailedAgain",
    "ResolutionError",
    "RunContext",
    "RunFailed",
    "RunResult",
    "ScheduleRejected",
    "SchemaError",
    "SessionDelivery",
    "SessionIdNotFree",
    "SessionInvokeDelivery",
    "SessionLease",
    "Snoozed",
    "StatementError",
    "StatifierObanError",
    "StoreUnavailable",
    "TimerDelivery",
    "TimerJob",
    "TracingUnavailable",
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
