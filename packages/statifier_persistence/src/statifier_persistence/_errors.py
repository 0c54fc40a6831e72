"""Typed errors of statifier_persistence, all under ``PersistenceError``.

A step that does not apply for an ordinary reason is an answer, not an error: a terminal
execution answers ``Discarded``, a key seen before answers ``AlreadyApplied`` (see
``statifier_persistence._records``). Errors are for what the caller must act on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._records import Execution


class PersistenceError(Exception):
    """Base class of every error statifier_persistence raises."""


class InvalidArgument(PersistenceError, ValueError):
    """An argument is of the wrong type or outside its bounds; nothing was read or written."""


class InvalidPrefix(InvalidArgument):
    """The schema prefix is not a plain lowercase identifier."""


class StatementError(PersistenceError, LookupError):
    """A packaged SQL statement is missing or has an unknown placeholder (a bug, not input)."""


class NotConnected(PersistenceError):
    """The call has neither a ``conn=`` nor a pool to take a connection from."""


class StoreError(PersistenceError):
    """PostgreSQL failed or could not be reached; the transaction rolled back.

    The psycopg (or psycopg_pool) error is chained as ``__cause__``.
    """


class SchemaError(PersistenceError):
    """The persistence tables could not be installed or checked (cause chained)."""


class NotInstalled(StoreError):
    """The database lacks our tables or columns: they were never installed into this
    schema, or by an older release. Run ``statifier-oban install`` (or
    ``statifier_persistence.install``) against it; the installer also upgrades."""


class WaitTimeout(PersistenceError, TimeoutError):
    """``Executions.wait`` gave up: the execution did not get where it was waited for in
    time. ``execution`` is the row as last seen."""

    def __init__(self, execution: Execution, wanted: str, timeout: float) -> None:
        self.execution = execution
        self.wanted = wanted
        self.timeout = timeout
        super().__init__(
            f"execution {execution.id!r} did not reach {wanted} within {timeout:g} s "
            f"(it is {execution.status})"
        )


class WaitUnreachable(PersistenceError):
    """``Executions.wait``: the execution ended without getting where it was waited for,
    and can no longer change. ``execution`` is its row."""

    def __init__(self, execution: Execution, wanted: str) -> None:
        self.execution = execution
        self.wanted = wanted
        super().__init__(
            f"execution {execution.id!r} is {execution.status} and will never reach {wanted}"
        )


class ExecutionNotFound(PersistenceError, LookupError):
    """No execution has this id (it never existed, or was deleted)."""

    def __init__(self, execution_id: str) -> None:
        self.execution_id = execution_id
        super().__init__(f"no execution {execution_id!r}")


class ExecutionExists(PersistenceError):
    """``create`` was given an id that an execution already has; nothing was written."""

    def __init__(self, execution_id: str, message: str | None = None) -> None:
        self.execution_id = execution_id
        super().__init__(message or f"execution {execution_id!r} already exists")


class ExecutionIdNotFree(ExecutionExists):
    """``create`` was given the id of an earlier execution (its row deleted) whose timer
    jobs remain: a new execution would share their keys (``EarlierTimers``); nothing was
    written. The id is free again once those jobs are gone (deleted, or pruned by oban)."""

    def __init__(self, execution_id: str) -> None:
        super().__init__(
            execution_id,
            f"execution id {execution_id!r} is not free: timer jobs of an earlier execution"
            " with this id remain in oban_jobs, and a new one would share their keys; delete"
            " them (or let oban's pruner remove them) before using the id again",
        )


class NeedsMigration(PersistenceError):
    """The execution is parked (``needs_migration``): not terminal, but it takes no event.

    ``execution`` is the parked row. A timer firing into it should be retried later (the
    oban delivery snoozes it); ``Executions.unpark`` makes it active again.
    """

    def __init__(self, execution: Execution) -> None:
        self.execution = execution
        super().__init__(f"execution {execution.id!r} is parked until it is migrated")


class InvalidTransition(PersistenceError):
    """A status change that the execution's current status does not allow."""

    def __init__(self, execution_id: str, status: str, wanted: str) -> None:
        self.execution_id = execution_id
        self.status = status
        self.wanted = wanted
        super().__init__(f"execution {execution_id!r} is {status}: it cannot become {wanted}")


class IdentityMismatch(PersistenceError):
    """A chart or a position is not the one the execution row names.

    ``expected`` is the identity on the execution row, ``found`` the identity of what was
    loaded (the stored position's, or the registered source's once compiled). Nothing is
    driven: the execution is left as it is for an operator (or a migration) to resolve.
    """

    def __init__(self, execution_id: str, expected: str, found: str) -> None:
        self.execution_id = execution_id
        self.expected = expected
        self.found = found
        super().__init__(f"execution {execution_id!r} runs chart {expected!r}, but found {found!r}")


class ChartNotRegistered(PersistenceError, LookupError):
    """No chart with this identity is in the registry."""

    def __init__(self, identity: str) -> None:
        self.identity = identity
        super().__init__(f"no chart {identity!r} is registered")


class ChartConflict(PersistenceError):
    """A chart of this identity is registered with other resolved ``src`` documents."""

    def __init__(self, identity: str) -> None:
        self.identity = identity
        super().__init__(f"chart {identity!r} is registered with different resolved src documents")


class ChartUnusable(PersistenceError):
    """A registered chart's source cannot be used (too large, or not compilable here)."""

    def __init__(self, identity: str, message: str) -> None:
        self.identity = identity
        super().__init__(f"registered chart {identity!r}: {message}")


class CorruptExecution(PersistenceError):
    """A stored execution row or position is invalid or larger than the configured bounds.

    Storage is as untrusted as user input: nothing read from it is driven unchecked.
    """

    def __init__(self, execution_id: str, message: str) -> None:
        self.execution_id = execution_id
        super().__init__(f"execution {execution_id!r}: {message}")


class StalePosition(CorruptExecution):
    """The stored position is older than its execution row says: an earlier position of
    the same execution was written back over the current one (a keyed position's digest
    proves who wrote it, not when). Nothing is driven from it.

    ``stored`` and ``recorded`` are the ``(macrostep, round)`` counters of the position
    found and of the one the row was stored with.
    """

    def __init__(
        self, execution_id: str, stored: tuple[int, int], recorded: tuple[int, int]
    ) -> None:
        self.stored = stored
        self.recorded = recorded
        super().__init__(
            execution_id,
            f"the stored position is stale: it is at macrostep {stored[0]} round {stored[1]}, "
            f"the row was stored at macrostep {recorded[0]} round {recorded[1]}",
        )


class UnstorablePosition(PersistenceError):
    """The position a step produced cannot be stored; the step rolled back."""

    def __init__(self, execution_id: str, message: str) -> None:
        self.execution_id = execution_id
        super().__init__(f"execution {execution_id!r}: {message}")


class PositionTooLarge(UnstorablePosition):
    """The new position is larger than ``Limits.max_position_bytes``; the step rolled back."""

    def __init__(self, execution_id: str, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(execution_id, f"the position is {size} bytes, over the {limit} limit")


class EffectRefused(PersistenceError):
    """Raised by an executor: this effect has no durable form here (a chart-level refusal).

    The step does not fail: a refused delayed send becomes ``error.communication`` in the
    chart (SCXML 6.2), a refused invocation ``error.communication.invoke.<id>``. Any other
    exception from an executor is a failed durable write: it rolls the step back.
    """

    def __init__(self, reason: str, detail: Any = None) -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(reason)


class ChartRetired(PersistenceError):
    """The chart revision is retired: it takes no new execution and no migration."""

    def __init__(self, identity: str) -> None:
        self.identity = identity
        super().__init__(f"chart {identity!r} is retired")


class MigrationRefused(PersistenceError):
    """An execution cannot move to the revision asked for; nothing changed.

    ``reason`` says why; when the position itself cannot cross (a state that is gone and
    not mapped, a variable without a value...), the engine's typed refusal is chained as
    ``__cause__`` (``statifier.core.position.UnknownStates`` names the states).
    """

    def __init__(self, execution_id: str, reason: str) -> None:
        self.execution_id = execution_id
        self.reason = reason
        super().__init__(f"execution {execution_id!r} cannot migrate: {reason}")


class RetirementRefused(PersistenceError):
    """A revision cannot be retired; nothing changed. ``pins`` is the ``PinReport``."""

    def __init__(self, identity: str, pins: Any, message: str) -> None:
        self.identity = identity
        self.pins = pins
        super().__init__(f"chart {identity!r} cannot be retired: {message}")


class MailboxFull(PersistenceError):
    """A message that must arrive (a child's ``done``, a parent's ``cancel``) found the
    receiver's mailbox full (``Limits.max_pending_messages``); the step rolled back, and
    its job retries once the receiver has taken some of its messages."""

    def __init__(self, receiver: str, reason: str) -> None:
        self.receiver = receiver
        self.reason = reason
        super().__init__(f"execution {receiver!r} cannot take the message: {reason}")
