"""Invocations answered by the test: a handler whose every run asks a script what to do.

``DurableEnv.invocations(invoke_type)`` makes the environment's executor start
``<invoke type="...">`` with a :class:`ScriptedHandler` (a real ``InvokeHandler``: its
jobs are stored, fetched, run and acked like any other). Each run asks the type's
:class:`ScriptedInvocations` for its answer: one given in advance (``answer``), or, by
default, one the test gives later while the run waits (``hold``, then ``release``): an
invocation that hangs until told, which is how a timeout is tested.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from statifier.core.effects import Invoke

from .._config import Config
from ..invocations._handler import InvokeHandler, Ok, RunContext, RunResult

if TYPE_CHECKING:
    from ._env import DurableEnv

Answer = RunResult | BaseException | Callable[[Invoke, RunContext], Any]
"""What a scripted run answers: ``Ok(data)``, ``Error(reason)``, ``FanOut(items)``,
``Deferred()``; an exception, which the run raises; or a function of the invoke effect and
the run's context returning (or awaiting to) one of those."""


@dataclass(frozen=True, slots=True)
class InvocationRun:
    """One run of a scripted invocation: the execution (``scope``), the invoke effect (its
    ``invoke_id``, ``params``...) and the attempt."""

    scope: str
    invoke: Invoke
    attempt: int
    max_attempts: int
    job_id: int | None


class ScriptedHandler(InvokeHandler):
    """The handler of every invoke type a ``DurableEnv`` scripts (one subclass per
    ``max_attempts``, registered so that job rows may name it)."""

    async def run(self, invoke: Invoke, ctx: RunContext) -> RunResult:
        """Ask the active environment's script for the invoke type."""
        from ._env import active_env

        return await active_env().script(invoke.type).perform(invoke, ctx)

    def config(self) -> Config:
        """The active environment's ``Config``."""
        from ._env import active_env

        return active_env().config


_classes: dict[int, type[ScriptedHandler]] = {}


def handler_class(max_attempts: int) -> type[ScriptedHandler]:
    """The ``ScriptedHandler`` subclass whose jobs have ``max_attempts`` attempts."""
    found = _classes.get(max_attempts)
    if found is None:
        name = f"Attempts{max_attempts}"
        found = type(
            name,
            (ScriptedHandler,),
            {
                "max_attempts": max_attempts,
                "__module__": __name__,
                "__qualname__": f"ScriptedHandler.{name}",
                "__doc__": f"A scripted invocation's handler, {max_attempts} attempt(s).",
            },
        )
        # Defining it registered it under module:qualname (InvokeHandler.__init_subclass__):
        # rows name it by that path, which no module attribute holds.
        _classes[max_attempts] = found
    return found


@dataclass
class _Held:
    run: InvocationRun
    answer: asyncio.Future[Answer]


class ScriptedInvocations:
    """How the test answers the invocations of one invoke type (see the module docstring).

    ``runs`` lists every run so far. Until :meth:`answer` is called, runs are held: they
    wait for :meth:`release`.
    """

    def __init__(self, env: DurableEnv, invoke_type: str, max_attempts: int) -> None:
        self.invoke_type = invoke_type
        self.max_attempts = max_attempts
        self.handler = handler_class(max_attempts)
        self.runs: list[InvocationRun] = []
        """Every run of an invocation of this type, in order."""
        self._env = env
        self._answer: Answer | None = None
        self._held: list[_Held] = []

    @property
    def held(self) -> list[InvocationRun]:
        """The runs waiting for :meth:`release`, oldest first."""
        return [held.run for held in self._held]

    def answer(self, answer: Answer) -> ScriptedInvocations:
        """Answer every later run with ``answer`` at once. Returns the script."""
        self._answer = answer
        return self

    def hold(self) -> ScriptedInvocations:
        """Make every later run wait for :meth:`release` (the default). Returns the script."""
        self._answer = None
        return self

    async def release(
        self,
        answer: Answer | None = None,
        *,
        invoke_id: str | None = None,
        scope: str | None = None,
    ) -> list[InvocationRun]:
        """Answer the held runs (those of ``invoke_id`` / ``scope`` if given) with
        ``answer`` (default ``Ok()``), then let the environment settle: their jobs are
        acked and whatever their answers lead to that is due now runs. Returns the runs
        released; raises ``LookupError`` if none matched."""
        chosen = [
            held
            for held in self._held
            if (invoke_id is None or held.run.invoke.invoke_id == invoke_id)
            and (scope is None or held.run.scope == scope)
        ]
        if not chosen:
            raise LookupError(
                f"no held run of {self.invoke_type!r}"
                + (f" with invoke id {invoke_id!r}" if invoke_id else "")
                + (f" in {scope!r}" if scope else "")
            )
        for held in chosen:
            self._held.remove(held)
            held.answer.set_result(answer if answer is not None else Ok())
        await self._env.settle()
        return [held.run for held in chosen]

    async def perform(self, invoke: Invoke, ctx: RunContext) -> RunResult:
        """One run: record it, then answer as scripted (waiting while held)."""
        run = InvocationRun(ctx.scope, invoke, ctx.attempt, ctx.max_attempts, ctx.job_id)
        self.runs.append(run)
        answer = self._answer
        if answer is None:
            held = _Held(run, asyncio.get_running_loop().create_future())
            self._held.append(held)
            async with self._env.holding():
                answer = await held.answer
        return await _give(answer, invoke, ctx)


async def _give(answer: Answer, invoke: Invoke, ctx: RunContext) -> RunResult:
    """``answer`` as a run's result: called if a function, raised if an exception."""
    value: Any = answer
    if callable(value) and not isinstance(value, BaseException):
        value = value(invoke, ctx)
        if inspect.isawaitable(value):
            value = await value
    if isinstance(value, BaseException):
        raise value
    result: RunResult = value  # anything else: the worker refuses it (InvalidRunAnswer)
    return result
