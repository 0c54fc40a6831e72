"""statifier_persistence: durable SCXML executions in PostgreSQL, for hosts with no process
per execution.

``Executions`` creates executions (stored with their chart in a registry any node
compiles from), steps events into them (one transaction each: lock, liveness, drive,
durable effects through an ``EffectExecutor`` on the same connection, store), cancels,
parks and lists them, and moves them between chart revisions (``migrate``; a revision
is retired once no ``PinSource`` counts anything on it). A step given a ``key`` applies
at most once. A fan-out's children are executions too (``Executions.start_child``);
their finishing settles the parent's invocation once (``Executions.fan_out_answer``,
through a ``FanOutExecutor``). An ``<invoke type="scxml">`` starts its chart as a child
execution in the parent's step, and the two talk through mailboxes
(``Executions.receive``, through a ``MailboxExecutor``); BasicHTTP sends are durable work
of a ``PostExecutor``, their failures raised through ``Executions.send_failed``. Every
change writes a history
entry in its own transaction (``statifier_persistence.history``; ``Executions.history``,
``prune_history``), and ``Executions.wait`` and ``follow`` are woken by the commits of
changes. ``install`` creates the tables.
``statifier_oban.executions`` joins this package to oban jobs: timers, invocations, the
deliveries a standalone ``statifier-oban worker`` runs, and the pin source of pending
timers; ``statifier_oban.children`` runs fan-outs.

Modules with a leading underscore are private; ``statifier_persistence.schema`` is the
installer.
"""

from __future__ import annotations

from importlib import metadata as _metadata

from ._answers import NOT_LIVE, SUPERSEDED, LiveAnswer, live_answer
from ._armed import CANCELLED
from ._children import ChildOutcome, ChildStart, child_execution_id
from ._errors import (
    ChartConflict,
    ChartNotRegistered,
    ChartRetired,
    ChartUnusable,
    CorruptExecution,
    EffectRefused,
    ExecutionExists,
    ExecutionIdNotFree,
    ExecutionNotFound,
    IdentityMismatch,
    InvalidArgument,
    InvalidPrefix,
    InvalidTransition,
    MailboxFull,
    MigrationRefused,
    NeedsMigration,
    NotConnected,
    NotInstalled,
    PersistenceError,
    PositionTooLarge,
    RetirementRefused,
    SchemaError,
    StalePosition,
    StatementError,
    StoreError,
    UnstorablePosition,
    WaitTimeout,
    WaitUnreachable,
)
from ._executions import EventBuilder, Executions, StepObserver
from ._executor import (
    EarlierTimers,
    EffectExecutor,
    HostHook,
    LoggingHost,
    PostExecutor,
    TimersSent,
)
from ._invoked import NOT_FROM_PARENT, invoked_child_id
from ._limits import MAX_ID_LENGTH, MAX_KEY_LENGTH, Limits
from ._messages import NO_MESSAGE, UNREADABLE, MailboxExecutor, MessageKind
from ._pins import ExecutionPins, LinkPins, PinReport, PinSource
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
from ._revisions import Bulk, Migrated, Revision, RevisionMethods
from ._settlement import (
    MAX_FAN_OUT_CHILDREN,
    POLICIES,
    FanOut,
    FanOutExecutor,
    FanOutKey,
    FanOutState,
    Policy,
)
from .history import History, HistoryEntry, HistoryPage, Trigger, triggered_by
from .schema import install, install_sql, verify

try:
    __version__ = _metadata.version("statifier-persistence")
    """The installed distribution's version (the one in ``pyproject.toml``)."""
except _metadata.PackageNotFoundError:  # pragma: no cover - running from a bare source tree
    __version__ = "0+unknown"

__all__ = [
    "CANCELLED",
    "MAX_FAN_OUT_CHILDREN",
    "MAX_ID_LENGTH",
    "MAX_KEY_LENGTH",
    "NOT_FROM_PARENT",
    "NOT_LIVE",
    "NO_MESSAGE",
    "POLICIES",
    "STATUSES",
    "SUPERSEDED",
    "TERMINAL",
    "UNREADABLE",
    "AlreadyApplied",
    "Bulk",
    "ChartConflict",
    "ChartNotRegistered",
    "ChartRetired",
    "ChartUnusable",
    "ChildOutcome",
    "ChildStart",
    "CorruptExecution",
    "Decline",
    "Declined",
    "Discarded",
    "EarlierTimers",
    "EffectExecutor",
    "EffectRefused",
    "EventBuilder",
    "Execution",
    "ExecutionExists",
    "ExecutionIdNotFree",
    "ExecutionNotFound",
    "ExecutionPins",
    "ExecutionStatus",
    "Executions",
    "FanOut",
    "FanOutExecutor",
    "FanOutKey",
    "FanOutState",
    "History",
    "HistoryEntry",
    "HistoryPage",
    "HostHook",
    "IdentityMismatch",
    "InvalidArgument",
    "InvalidPrefix",
    "InvalidTransition",
    "Limits",
    "LinkPins",
    "LiveAnswer",
    "LoggingHost",
    "MailboxExecutor",
    "MailboxFull",
    "MessageKind",
    "Migrated",
    "MigrationRefused",
    "NeedsMigration",
    "NotConnected",
    "NotInstalled",
    "Page",
    "ParentLink",
    "PersistenceError",
    "PinReport",
    "PinSource",
    "Policy",
    "PositionTooLarge",
    "PostExecutor",
    "RetirementRefused",
    "Revision",
    "RevisionMethods",
    "SchemaError",
    "StalePosition",
    "StatementError",
    "StepObserver",
    "StepResult",
    "Stepped",
    "StoreError",
    "TimersSent",
    "Trigger",
    "UnstorablePosition",
    "WaitTimeout",
    "WaitUnreachable",
    "__version__",
    "child_execution_id",
    "install",
    "install_sql",
    "invoked_child_id",
    "live_answer",
    "triggered_by",
    "verify",
]
