"""Invoke deliveries of the tests, named on job meta as ``oban_support.invoke_deliveries:Name``.

oban's worker resolves the delivery path on every run and builds a fresh instance of a
class, so everything is recorded at module level: ``CALLS`` holds every call any delivery
here received, in order, each with the oban job it ran under (``None`` outside a job).
Tests filter by scope (every test uses scopes of its own).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from oban import current_job
from statifier_oban.delivery import Delivered, Discarded, SessionInvokeDelivery
from statifier_oban.rows import _resolve


@dataclass(frozen=True)
class Call:
    """One call of a delivery door."""

    door: str
    """``"deliver"`` or ``"deliver_failure"``."""
    scope: str
    invoke_id: str
    data: Any
    """The donedata (``deliver``) or ``{"reason", "attempts", "detail"}`` (failure)."""
    caller_context: Any
    job_id: int | None


CALLS: list[Call] = []

ANSWERS: dict[str, Any] = {}
"""``ANSWERS[scope]``: what ``RecordingInvokeDelivery`` answers for that scope."""


def calls_for(scope: str) -> list[Call]:
    """Every recorded call for ``scope``, in order."""
    return [call for call in CALLS if call.scope == scope]


def calls_in_job(job_id: int) -> list[Call]:
    """Every recorded call made while job ``job_id`` ran."""
    return [call for call in CALLS if call.job_id == job_id]


def forget(*scopes: str) -> None:
    """Drop the recorded calls and answers of ``scopes``."""
    CALLS[:] = [call for call in CALLS if call.scope not in scopes]
    for scope in scopes:
        ANSWERS.pop(scope, None)


def _record(door: str, scope: str, invoke_id: str, data: Any, caller_context: Any) -> None:
    job = current_job()
    CALLS.append(
        Call(door, scope, invoke_id, data, caller_context, job.id if job is not None else None)
    )


def failure(reason: str, attempts: int, detail: str) -> dict[str, Any]:
    """The failure triple as recorded (and as the session's event data)."""
    return {"reason": reason, "attempts": attempts, "detail": detail}


class RecordingInvokeDelivery:
    """Records every call, then answers ``ANSWERS[scope]`` (``Delivered()`` by default)."""

    def deliver(self, scope: str, invoke_id: str, data: Any, caller_context: Any = None) -> Any:
        """See the class docstring."""
        _record("deliver", scope, invoke_id, data, caller_context)
        return ANSWERS.get(scope, Delivered())

    async def deliver_failure(
        self,
        scope: str,
        invoke_id: str,
        reason: str,
        attempts: int,
        detail: str,
        caller_context: Any = None,
    ) -> Any:
        """See the class docstring (an ``async`` door: both forms must be awaited)."""
        _record(
            "deliver_failure", scope, invoke_id, failure(reason, attempts, detail), caller_context
        )
        return ANSWERS.get(scope, Delivered())


class RecordingSessionInvokeDelivery:
    """The default ``SessionInvokeDelivery``, recording each call first."""

    def deliver(self, scope: str, invoke_id: str, data: Any, caller_context: Any = None) -> Any:
        """Record, then deliver into the live session."""
        _record("deliver", scope, invoke_id, data, caller_context)
        return SessionInvokeDelivery().deliver(scope, invoke_id, data, caller_context)

    def deliver_failure(
        self,
        scope: str,
        invoke_id: str,
        reason: str,
        attempts: int,
        detail: str,
        caller_context: Any = None,
    ) -> Any:
        """Record, then deliver the failure into the live session."""
        _record(
            "deliver_failure", scope, invoke_id, failure(reason, attempts, detail), caller_context
        )
        return SessionInvokeDelivery().deliver_failure(
            scope, invoke_id, reason, attempts, detail, caller_context
        )


class DeliverOnlyDelivery:
    """Resolves, but has no ``deliver_failure``: not an invoke delivery, so jobs retry."""

    def deliver(self, scope: str, invoke_id: str, data: Any, caller_context: Any = None) -> Any:
        """Records (it must never be called)."""
        _record("deliver", scope, invoke_id, data, caller_context)
        return Discarded("deliver-only")


# What ``statifier-oban worker --module`` does for a host module: job rows may name the
# classes defined here (ADR 13). Tests of refusals name classes of other modules.
_resolve.allow_module(__name__)
