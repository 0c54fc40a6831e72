"""The invoke handler base: an ``<invoke type="myapp:capture">`` runs as an Oban job.

Subclass ``InvokeHandler``, give it ``config()`` and ``async def run(self, invoke)`` or
``async def run(self, invoke, ctx)`` (a second positional parameter, even an optional
one, means the two-argument form: ``ctx`` carries the scope and invoke id). Register it
per session (``Session.start(..., invoke_handlers={"myapp:capture": CaptureHandler})``).
Entering the state stores one job, unique on ``(scope, invoke_id, macrostep)``; leaving
it before the job runs cancels every generation of it.

``run`` answers ``Ok(data)`` (-> ``done.invoke.<id>``), ``Error(reason)`` or raises
(retried; the terminal attempt delivers ``error.communication.invoke.<id>`` with
``{"reason", "attempts", "detail"}``), ``FanOut(items)`` (one child start per item through
the host's ``ChildStarter``), or ``Deferred()`` (the job completes; someone else answers
later through the invoke delivery). ``run`` is at-least-once: key the work on
``invoke.invoke_id``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from statifier.core.effects import Invoke
from statifier.core.events import Event

from .._config import Config
from .._errors import HandlerNotConfigured, InvalidHandlerClass, ResolutionError
from ..rows._resolve import is_path, lookup, path_of, register

if TYPE_CHECKING:
    from statifier.runtime.invoke import HandlerContext


@dataclass(frozen=True, slots=True)
class Ok:
    """The invocation succeeded; ``data`` becomes the ``done.invoke.<id>`` event's data."""

    data: Any = None


@dataclass(frozen=True, slots=True)
class Error:
    """The attempt failed; retried while attempts remain (``run_failed`` at the last)."""

    reason: Any


@dataclass(frozen=True, slots=True)
class FanOut:
    """The invocation is N children, one per item; their settlement answers it once.

    ``max_concurrency`` is validated (None or a positive integer) and otherwise a hint:
    the queue's concurrency limit is what bounds how many children start at once.
    """

    items: Sequence[Any]
    max_concurrency: int | None = None


@dataclass(frozen=True, slots=True)
class Deferred:
    """The job hands the work on; the invocation stays open until answered elsewhere."""


RunResult = Ok | Error | FanOut | Deferred
"""What an invoke handler's ``run`` returns: the answer, the failure, a fan-out of child
executions, or a deferral to an answer that arrives later."""


@dataclass(frozen=True, slots=True)
class RunContext:
    """What ``run(invoke, ctx)`` gets besides the effect."""

    scope: str
    invoke_id: str
    attempt: int
    max_attempts: int
    job_id: int | None


class InvokeHandler:
    """Base class of Oban-backed invoke handlers (see the module docstring).

    ``max_attempts`` on the class caps the attempts of every job the handler enqueues
    (None: oban's default of 20); it is validated when the class is defined. Defining a
    subclass registers it, so job rows naming it resolve in this process (ADR 13).
    """

    max_attempts: ClassVar[int | None] = None
    run_takes_context: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cap = cls.__dict__.get("max_attempts", cls.max_attempts)
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise InvalidHandlerClass(
                f"{cls.__qualname__}.max_attempts must be a positive integer or None"
            )
        if cap is not None and cap > 32767:
            raise InvalidHandlerClass(f"{cls.__qualname__}.max_attempts must be at most 32767")
        run = getattr(cls, "run", None)
        if run is None:
            raise InvalidHandlerClass(
                f"{cls.__qualname__} must define async def run(self, invoke) "
                "or async def run(self, invoke, ctx)"
            )
        positional = [
            p
            for p in list(inspect.signature(run).parameters.values())[1:]
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        if not positional:
            raise InvalidHandlerClass(f"{cls.__qualname__}.run must take the invoke effect")
        cls.run_takes_context = len(positional) >= 2
        # Defining a handler class is registering it: job rows may name it (ADR 13). A
        # class local to a function has no path a row could name, so there is none to add.
        if is_path(path_of(cls)):
            register(cls)

    if TYPE_CHECKING:
        # Declared, not defined: a subclass's run(self, invoke) and run(self, invoke, ctx)
        # are both valid overrides, which a concrete base method would forbid one of.
        run: Callable[..., Awaitable[RunResult]]

    def config(self) -> Config:
        """The host's ``Config`` (read when a job is enqueued or runs, never at planning)."""
        raise HandlerNotConfigured(f"{type(self).__qualname__} must define config()")

    # -- the session-facing protocol (statifier.runtime.invoke.SessionInvokeHandler) ---------------

    async def start(self, invoke: Invoke, ctx: HandlerContext) -> None:
        """Store the invocation's job (entering the invoking state)."""
        from ._enqueue import enqueue

        await enqueue(self.config(), type(self), ctx.session_id, invoke)

    async def cancel(self, invoke_id: str, ctx: HandlerContext) -> None:
        """Cancel every pending job of the invocation (leaving the invoking state)."""
        from ._enqueue import cancel

        await cancel(self.config(), ctx.session_id, invoke_id, handler=type(self))

    def forward(self, invoke_id: str, event: Event, ctx: HandlerContext) -> None:
        """Job-shaped invocations take no forwarded events; this is a no-op."""


def invoke_handler(path: str) -> InvokeHandler:
    """The ``InvokeHandler`` a row names at ``path`` (its class, checked, then instantiated).

    Resolved only among what this process registered (``rows._resolve``, ADR 13);
    ``ResolutionError`` otherwise, or when the class is not an ``InvokeHandler``.
    """
    target = lookup(path)
    if not isinstance(target, type) or not issubclass(target, InvokeHandler):
        raise ResolutionError(f"{path!r} is not an InvokeHandler")
    return target()
