"""In-process invocations: the handler protocol and the built-in ``scxml`` handler.

A handler is registered per session under an ``<invoke type>``. The session calls
``start`` for each ``Invoke`` effect, ``cancel`` for each ``CancelInvoke`` and ``forward``
for events sent to ``#_<invokeid>`` (and autoforwarded ones). Completion comes back
through ``Session.done_invocation`` / ``Session.failed_invocation``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

from statifier.chart.compiler import compile_chart
from statifier.core import effects as fx
from statifier.core.events import Event
from statifier.errors import StatifierError

if TYPE_CHECKING:
    from statifier.chart.model import Machine
    from statifier.runtime.session import Session

SourceResolver = Callable[[str], str]


@dataclass(frozen=True, slots=True)
class HandlerContext:
    """What a handler gets besides the effect: the owning session."""

    session_id: str
    session: Session


@runtime_checkable
class SessionInvokeHandler(Protocol):
    """The in-process invocation protocol. Methods may be plain or ``async``."""

    def start(self, invoke: fx.Invoke, ctx: HandlerContext) -> Awaitable[None] | None:
        """Begin the invocation. Raising means it could not start."""

    def cancel(self, invoke_id: str, ctx: HandlerContext) -> Awaitable[None] | None:
        """Stop the invocation (its state was exited)."""

    def forward(self, invoke_id: str, event: Event, ctx: HandlerContext) -> Awaitable[None] | None:
        """Deliver an event the parent sent to ``#_<invokeid>`` (or autoforwarded)."""


class InvocationStartError(StatifierError):
    """An invocation could not start (bad source, chart error...)."""


class InvocationLimitExceeded(InvocationStartError):
    """Starting this child would make its tree of sessions too deep or too large."""


DEFAULT_TREE_DEPTH: Final = 16
"""How deep a tree of invoked charts nests below its top by default."""

DEFAULT_TREE_SESSIONS: Final = 1_000
"""How many sessions one tree of invoked charts holds at once by default (the top one too)."""


@dataclass(frozen=True, slots=True)
class TreeLimits:
    """How far ``<invoke type="scxml">`` may grow one tree of sessions.

    A chart that invokes copies of itself would otherwise grow until the process runs out
    of memory. ``depth`` bounds the nesting below the top session, ``sessions`` the
    sessions alive in the tree at once (the top one included). A child past either limit
    does not start: its parent receives ``error.communication.invoke.<id>`` like any
    invocation that cannot start. Durable executions bound their trees with the same
    defaults (``statifier_persistence.Limits``).
    """

    depth: int = DEFAULT_TREE_DEPTH
    sessions: int = DEFAULT_TREE_SESSIONS

    def __post_init__(self) -> None:
        if self.depth < 1 or self.sessions < 1:
            raise ValueError("tree limits are positive")


class SessionTree:
    """The live-session count one tree of sessions shares (mutable; one per top session)."""

    __slots__ = ("limits", "live")

    def __init__(self, limits: TreeLimits) -> None:
        self.limits = limits
        self.live = 0

    def check(self, depth: int) -> None:
        """Raise ``InvocationLimitExceeded`` if a session at ``depth`` may not join."""
        if depth > self.limits.depth:
            raise InvocationLimitExceeded(
                f"invocations nest at most {self.limits.depth} levels deep"
            )
        if self.live >= self.limits.sessions:
            raise InvocationLimitExceeded(
                f"a tree of invocations holds at most {self.limits.sessions} live sessions"
            )


def child_seed(machine: Machine, params: Mapping[str, Any]) -> dict[str, Any]:
    """The initial data of a child chart started by ``<invoke type="scxml">``: the
    ``<param>``/``namelist`` values of the variables the child declares (the others are
    not passed in, W3C test 245). Every driver seeds its children with this."""
    declared = {d.id for d in machine.data}
    return {name: value for name, value in params.items() if name in declared}


CHILD_MACHINES: Final = 32
"""Child charts compiled from one parent machine and kept for its next starts, at most."""

_CHILDREN: Final = "child machines"
"""The key, in a parent machine's ``_cache``, of the child machines compiled from it."""


def compile_child(source: str, parent: Machine, resolver: SourceResolver | None) -> Machine:
    """Compile a child chart for ``<invoke type="scxml">`` of ``parent``: with the host
    functions ``parent`` was compiled with (ADR 9) and ``resolver`` for its own ``src``.

    A state entered again starts its child again from the same text: the machine compiled
    from it is kept on ``parent`` (at most ``CHILD_MACHINES``, the oldest let go first)
    and shared, as sessions of one machine share it, unless compiling it asked
    ``resolver`` for something, which may answer differently next time."""
    kept: dict[str, Machine] | None = parent._cache.get(_CHILDREN)
    if kept is None:
        kept = parent._cache[_CHILDREN] = {}
    machine = kept.get(source)
    if machine is not None:
        return machine
    asked = False

    def resolve(src: str) -> str:
        nonlocal asked
        asked = True
        assert resolver is not None  # noqa: S101 - only passed on with a resolver
        return resolver(src)

    machine = compile_chart(
        source, resolver=None if resolver is None else resolve, functions=parent.functions
    )
    if not asked:
        if len(kept) >= CHILD_MACHINES:
            del kept[next(iter(kept))]
        kept[source] = machine
    return machine


class ScxmlInvokeHandler:
    """The built-in ``scxml`` type: a child ``Session`` from ``<content>`` or ``src``.

    ``src`` is resolved only through the host-supplied resolver given to the parent
    session; nothing is fetched from the network or the file system by default.
    """

    def __init__(self) -> None:
        self.children: dict[str, Session] = {}

    async def start(self, invoke: fx.Invoke, ctx: HandlerContext) -> None:
        """Compile the child chart and start it as a child session (of the parent's class)."""
        parent = ctx.session
        parent.tree.check(parent.depth + 1)
        source: Any = invoke.content
        if source is None and invoke.src is not None:
            if parent.resolver is None:
                raise InvocationStartError(f"no resolver for invoke src {invoke.src!r}")
            source = parent.resolver(invoke.src)
        if not isinstance(source, str):
            raise InvocationStartError("an scxml invocation needs a chart (content or src)")
        machine = compile_child(source, parent.machine, parent.resolver)
        child = await type(parent).start(
            machine,
            datamodel=child_seed(machine, invoke.params),
            resolver=parent.resolver,
            parent=(parent, invoke.invoke_id),
            max_macrostep_rounds=parent.max_macrostep_rounds,
            limits=parent.limits,
        )
        self.children[invoke.invoke_id] = child

    async def cancel(self, invoke_id: str, ctx: HandlerContext) -> None:
        """Cancel the child (its onexit handlers run) and stop it."""
        child = self.children.pop(invoke_id, None)
        if child is not None:
            child.detach_parent()
            await child.cancel_and_wait()
            await child.stop()

    async def finished(self, invoke_id: str) -> None:
        """Let go of the child of an invocation that answered (it has halted)."""
        child = self.children.pop(invoke_id, None)
        if child is not None:
            child.detach_parent()
            await child.stop()

    def forward(self, invoke_id: str, event: Event, ctx: HandlerContext) -> None:
        """Queue the event on the child session."""
        child = self.children.get(invoke_id)
        if child is None:
            raise LookupError(f"no child session for invocation {invoke_id!r}")
        child.send_event(event)

    def child(self, invoke_id: str) -> Session | None:
        """The child session of a live invocation."""
        return self.children.get(invoke_id)

    async def stop_all(self) -> None:
        """Stop every child (the parent is stopping)."""
        for invoke_id in list(self.children):
            child = self.children.pop(invoke_id)
            child.detach_parent()
            await child.stop()
