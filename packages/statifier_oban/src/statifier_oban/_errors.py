"""Typed errors of statifier_oban."""

from __future__ import annotations

from typing import Any


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


class StoreUnavailable(StatifierObanError):
    """The job store (PostgreSQL) could not answer; nothing is assumed."""


class UndecodableRow(StatifierObanError):
    """A job row's args are not a valid timer; the job is cancelled, never delivered."""


class CodecFailed(StatifierObanError):
    """An opaque codec could not be resolved or failed to decode; the job retries."""


class InvalidDelivery(StatifierObanError):
    """The delivery named on a job does not resolve, or answered something invalid."""
