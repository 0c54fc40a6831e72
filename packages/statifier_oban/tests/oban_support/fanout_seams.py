"""Seams of the fan-out tests, named on job rows as ``oban_support.fanout_seams:Name``.

oban's worker resolves these paths on every run and, for a class, builds a fresh instance, so
all state lives at module level, keyed by scope (every test uses scopes of its own):

* ``CONFIG``: what ``FanOutFromParams.config()`` answers (set by the test with
  ``use_config``; the invoke worker asks the handler for it when it fans out).
* ``ANSWERS[scope]``: every answer ``RecordingInvokeDelivery`` received, in order.
* ``STARTS[scope]``: every ``start_child`` call a starter here received (a ``StartCall``).
* ``CHILDREN``: the "children table" of ``RecordingStarter``: one entry per
  ``(parent scope, invoke_id, index)``, however often the start ran (idempotent by key).
* ``STARTER_SCRIPTS[scope]``: what a start of that scope does before it records the
  child, a function ``(StartCall) -> None`` (sync or async; raising fails the start, and
  answering ``Snoozed`` snoozes it, no child made).
"""

from __future__ import annotations

import inspect
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from oban import current_job
from statifier.core.effects import Invoke
from statifier_oban._config import Config
from statifier_oban.delivery import Delivered, Snoozed
from statifier_oban.invocations._handler import FanOut, InvokeHandler, RunContext, RunResult
from statifier_oban.rows import _resolve

MODULE = "oban_support.fanout_seams"
"""The import path prefix of everything here."""

HANDLER_PATH = f"{MODULE}:FanOutFromParams"
DELIVERY_PATH = f"{MODULE}:RecordingInvokeDelivery"
STARTER_PATH = f"{MODULE}:RecordingStarter"
SYNC_STARTER_PATH = f"{MODULE}:SyncStarter"
NOT_A_STARTER_PATH = f"{MODULE}:NotAStarter"

CONFIG: Config | None = None


def use_config(config: Config | None) -> None:
    """Make ``FanOutFromParams.config()`` answer ``config`` (None: raise)."""
    global CONFIG
    CONFIG = config


@dataclass(frozen=True)
class Answer:
    """One answer the recording delivery received."""

    kind: str
    """``"done"`` or ``"failed"``."""
    invoke_id: str
    data: Any = None
    reason: str | None = None
    attempts: int | None = None
    detail: str | None = None
    caller_context: Any = None


@dataclass(frozen=True)
class StartCall:
    """One ``start_child`` call."""

    parent_scope: str
    invoke: Invoke
    index: int
    count: int
    opts: dict[str, Any]
    job_id: int | None
    attempt: int | None


StarterScript = Callable[[StartCall], Awaitable[Snoozed | None] | Snoozed | None]

ANSWERS: defaultdict[str, list[Answer]] = defaultdict(list)
STARTS: defaultdict[str, list[StartCall]] = defaultdict(list)
CHILDREN: dict[tuple[str, str, int], StartCall] = {}
STARTER_SCRIPTS: dict[str, StarterScript] = {}


def forget(*scopes: str) -> None:
    """Drop everything recorded for ``scopes``."""
    for scope in scopes:
        ANSWERS.pop(scope, None)
        STARTS.pop(scope, None)
        STARTER_SCRIPTS.pop(scope, None)
        for key in [key for key in CHILDREN if key[0] == scope]:
            del CHILDREN[key]


def children_of(scope: str, invoke_id: str) -> list[int]:
    """The indices of the children that exist for ``(scope, invoke_id)``, sorted."""
    return sorted(index for s, i, index in CHILDREN if s == scope and i == invoke_id)


class FanOutFromParams(InvokeHandler):
    """Fans out over ``params["items"]`` with ``params["max_concurrency"]`` as the hint.

    Whatever the params hold is handed to ``FanOut`` unchecked (a string, a number, a
    missing key as None), so the tests can feed the worker every shape.
    """

    def config(self) -> Config:
        """The config the test installed with ``use_config``."""
        if CONFIG is None:
            raise RuntimeError("oban_support.fanout_seams.use_config was not called")
        return CONFIG

    async def run(self, invoke: Invoke, ctx: RunContext | None = None) -> RunResult:
        """``FanOut(params["items"], params["max_concurrency"])``."""
        items: Any = invoke.params.get("items")  # deliberately unchecked: any shape goes
        return FanOut(items, invoke.params.get("max_concurrency"))


class RecordingInvokeDelivery:
    """Records every answer under its scope and says ``Delivered()``."""

    async def deliver(
        self, scope: str, invoke_id: str, data: Any, caller_context: Any = None
    ) -> Delivered:
        """Record a ``done`` answer."""
        ANSWERS[scope].append(Answer("done", invoke_id, data=data, caller_context=caller_context))
        return Delivered()

    async def deliver_failure(
        self,
        scope: str,
        invoke_id: str,
        reason: str,
        attempts: int,
        detail: str,
        caller_context: Any = None,
    ) -> Delivered:
        """Record a ``failed`` answer."""
        ANSWERS[scope].append(
            Answer(
                "failed",
                invoke_id,
                reason=reason,
                attempts=attempts,
                detail=detail,
                caller_context=caller_context,
            )
        )
        return Delivered()


def _call(
    parent_scope: str, invoke: Invoke, index: int, count: int, opts: dict[str, Any]
) -> StartCall:
    job = current_job()
    return StartCall(
        parent_scope,
        invoke,
        index,
        count,
        dict(opts),
        job.id if job is not None else None,
        job.attempt if job is not None else None,
    )


class RecordingStarter:
    """Records the call, runs the scope's script (which may raise), then makes the child.

    Idempotent on ``(parent scope, invoke_id, index)``: a repeated start finds its child
    in ``CHILDREN`` and leaves it as it is.
    """

    async def start_child(
        self, parent_scope: str, invoke: Invoke, index: int, count: int, opts: dict[str, Any]
    ) -> Snoozed | None:
        """See the class docstring."""
        call = _call(parent_scope, invoke, index, count, opts)
        STARTS[parent_scope].append(call)
        script = STARTER_SCRIPTS.get(parent_scope)
        if script is not None:
            outcome = script(call)
            if inspect.isawaitable(outcome):
                outcome = await outcome
            if isinstance(outcome, Snoozed):
                return outcome  # not started: asked again later
        CHILDREN.setdefault((parent_scope, invoke.invoke_id, index), call)
        return None


class SyncStarter:
    """A plain (not async) starter: records the call and makes the child."""

    def start_child(
        self, parent_scope: str, invoke: Invoke, index: int, count: int, opts: dict[str, Any]
    ) -> None:
        """See the class docstring."""
        call = _call(parent_scope, invoke, index, count, opts)
        STARTS[parent_scope].append(call)
        CHILDREN.setdefault((parent_scope, invoke.invoke_id, index), call)


class NotAStarter:
    """Resolves (it is a class) but has no ``start_child``: the worker must refuse it."""

    def start(self, *args: Any) -> None:
        """Not the starter callback."""
        raise AssertionError("NotAStarter.start must never be called")


# What ``statifier-oban worker --module`` does for a host module: job rows may name the
# classes defined here (ADR 13). Tests of refusals name classes of other modules.
_resolve.allow_module(__name__)
