"""statifier_persistence: durable SCXML executions in PostgreSQL, for hosts with no process
per execution.

``Executions`` creates executions (stored with their chart in a registry any node
compiles from), steps events into them (one transaction each: lock, liveness, drive,
durable effects through an ``EffectExecutor`` on the same connection, store), cancels,
parks and lists them. A step given a ``key`` applies at most once. ``install`` creates
the tables. ``statifier_oban.executions`` joins this package to oban jobs: timers,
invocations, and the deliveries a standalone ``statifier-oban worker`` runs.

Modules with a leading underscore are private; ``statifier_persistence.schema`` is the
installer.
"""

from __future__ import annotations

from importlib import metadata as _metadata

from ._answers import NOT_LIVE, live_answer
from ._errors import (
    ChartConflict,
    ChartNotRegistered,
    ChartUnusable,
    CorruptExecution,
    EffectRefused,
    ExecutionExists,
    ExecutionNotFound,
    IdentityMismatch,
    InvalidArgument,
    InvalidPrefix,
    InvalidTransition,
    NeedsMigration,
    NotConnected,
    PersistenceError,
    PositionTooLarge,
    SchemaError,
    StatementError,
    StoreError,
    UnstorablePosition,
)
from ._executions import EventBuilder, Executions
from ._executor import EffectExecutor, HostHook, LoggingHost
from ._limits import MAX_ID_LENGTH, MAX_KEY_LENGTH, Limits
from ._records import (
    STATUSES,
    TERMINAL,
    AlreadyApplied,
    Decline,
    Declined,
    Discarded,
    Execution,
    ExecutionStatus,
    Page,
    ParentLink,
    Stepped,
    StepResult,
)
from .schema import install, install_sql, verify

try:
    __version__ = _metadata.version("statifier-persistence")
    """The installed distribution's version (the one in ``pyproject.toml``)."""
except _metadata.PackageNotFoundError:  # pragma: no cover - running from a bare source tree
    __version__ = "0+unknown"

__all__ = [
    "MAX_ID_LENGTH",
    "MAX_KEY_LENGTH",
    "NOT_LIVE",
    "STATUSES",
    "TERMINAL",
    "AlreadyApplied",
    "ChartConflict",
    "ChartNotRegistered",
    "ChartUnusable",
    "CorruptExecution",
    "Decline",
    "Declined",
    "Discarded",
    "EffectExecutor",
    "EffectRefused",
    "EventBuilder",
    "Execution",
    "ExecutionExists",
    "ExecutionNotFound",
    "ExecutionStatus",
    "Executions",
    "HostHook",
    "IdentityMismatch",
    "InvalidArgument",
    "InvalidPrefix",
    "InvalidTransition",
    "Limits",
    "LoggingHost",
    "NeedsMigration",
    "NotConnected",
    "Page",
    "ParentLink",
    "PersistenceError",
    "PositionTooLarge",
    "SchemaError",
    "StatementError",
    "StepResult",
    "Stepped",
    "StoreError",
    "UnstorablePosition",
    "__version__",
    "install",
    "install_sql",
    "live_answer",
    "verify",
]
