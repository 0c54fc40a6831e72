"""Invoke handlers for the tests; job rows name them as ``oban_support.invoke_handlers:Name``.

The worker resolves the handler path on every run and builds a fresh instance, so state is
module level:

* ``RUNS``: every call of any ``run`` here, in order (``Run``: handler, scope, effect, the
  ``ctx`` argument as received or ``NO_CONTEXT``, the job's attempt);
* ``SCRIPTS[scope]``: what a handler does for that scope, ``fn(invoke, ctx)`` (sync or
  async; it may raise); absent: the handler's own default answer;
* ``use_config(config)``: the ``Config`` every ``config()`` here returns (a handler's
  ``start``/``cancel`` read it when a session enters or leaves the invoking state).

A ``run(self, invoke)`` handler learns its scope from ``oban.current_job()``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from oban import current_job
from statifier.core.effects import Invoke
from statifier_oban._config import Config
from statifier_oban.invocations._handler import Deferred, Error, InvokeHandler, Ok, RunContext

Script = Callable[[Invoke, Any], Any | Awaitable[Any]]

NO_CONTEXT: Any = object()
"""Recorded as ``Run.ctx`` by handlers whose ``run`` takes no context."""


@dataclass(frozen=True)
class Run:
    """One call of a handler's ``run``."""

    handler: str
    scope: str
    invoke: Invoke
    ctx: Any
    attempt: int | None


RUNS: list[Run] = []
SCRIPTS: dict[str, Script] = {}
_CONFIG: list[Config] = []


@contextmanager
def use_config(config: Config) -> Iterator[Config]:
    """Make ``config()`` of every handler here return ``config`` inside the block."""
    _CONFIG.append(config)
    try:
        yield config
    finally:
        _CONFIG.remove(config)


def runs_for(scope: str) -> list[Run]:
    """Every recorded run for ``scope``, in order."""
    return [run for run in RUNS if run.scope == scope]


def forget(*scopes: str) -> None:
    """Drop the runs and scripts of ``scopes``."""
    RUNS[:] = [run for run in RUNS if run.scope not in scopes]
    for scope in scopes:
        SCRIPTS.pop(scope, None)


async def _perform(handler: Any, invoke: Invoke, ctx: Any, default: Any) -> Any:
    job = current_job()
    scope = ctx.scope if isinstance(ctx, RunContext) else (job.args["scope"] if job else "?")
    RUNS.append(
        Run(type(handler).__name__, scope, invoke, ctx, job.attempt if job is not None else None)
    )
    script = SCRIPTS.get(scope)
    if script is None:
        return default
    answer = script(invoke, ctx)
    if inspect.isawaitable(answer):
        answer = await answer
    return answer


class _Configured:
    """Mixin: ``config()`` returns the config installed by ``use_config``."""

    def config(self) -> Config:
        """The innermost ``use_config`` config."""
        assert _CONFIG, "no config installed: wrap the test in use_config(config)"
        return _CONFIG[-1]


def captured(invoke: Invoke) -> dict[str, Any]:
    """The default answer of ``CaptureHandler``: a capture id derived from the params."""
    return {"capture_id": f"cap-{invoke.params.get('amount')}", "invoke_id": invoke.invoke_id}


class CaptureHandler(_Configured, InvokeHandler):
    """``run(self, invoke)``: by default answers ``Ok(captured(invoke))``; no attempts cap."""

    async def run(self, invoke: Invoke) -> Any:
        """See the class docstring."""
        return await _perform(self, invoke, NO_CONTEXT, Ok(captured(invoke)))


class ContextHandler(_Configured, InvokeHandler):
    """``run(self, invoke, ctx)``: by default answers ``Ok`` with what ctx said."""

    async def run(self, invoke: Invoke, ctx: RunContext) -> Any:
        """See the class docstring."""
        return await _perform(
            self, invoke, ctx, Ok({"scope": ctx.scope, "invoke_id": ctx.invoke_id})
        )


class OptionalContextHandler(_Configured, InvokeHandler):
    """``run(self, invoke, ctx=None)``: still the two-argument form."""

    async def run(self, invoke: Invoke, ctx: RunContext | None = None) -> Any:
        """See the class docstring."""
        return await _perform(self, invoke, ctx, Ok({"had_context": ctx is not None}))


class OnceHandler(_Configured, InvokeHandler):
    """``max_attempts = 1``: every attempt is the terminal one. Default: ``Error``."""

    max_attempts = 1

    async def run(self, invoke: Invoke, ctx: RunContext) -> Any:
        """See the class docstring."""
        return await _perform(self, invoke, ctx, Error({"code": "card_declined"}))


class ThriceHandler(_Configured, InvokeHandler):
    """``max_attempts = 3``. Default: ``Error``."""

    max_attempts = 3

    async def run(self, invoke: Invoke, ctx: RunContext) -> Any:
        """See the class docstring."""
        return await _perform(self, invoke, ctx, Error("processor unavailable"))


class DeferringHandler(_Configured, InvokeHandler):
    """Hands the work on: answers ``Deferred()`` (the invocation stays open)."""

    async def run(self, invoke: Invoke, ctx: RunContext) -> Any:
        """See the class docstring."""
        return await _perform(self, invoke, ctx, Deferred())
