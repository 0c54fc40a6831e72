"""States and what they hold: ``state``, ``parallel``, ``final``, ``history``,
``initial``, ``transition``, ``on_entry`` and ``on_exit``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from statifier.chart.xmltree import XNode
from statifier.values import brief

from ._actions import Action
from ._data import Data, DoneData
from ._expressions import Expr, source, words
from ._invoke import Invoke
from ._origin import BuildError, Origin, caller
from ._tree import Node, Tree

TransitionType = Literal["internal", "external"]
"""How a transition whose targets are all inside its state leaves it (``internal`` does
not exit and re-enter the state)."""

HistoryType = Literal["shallow", "deep"]
"""What a history state remembers: the active children, or every active descendant."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Transition(Node):
    """``<transition>``: on a matching event (or none, for an eventless transition) whose
    condition holds, run the actions and go to the targets."""

    event: str | None = None
    cond: str | None = None
    target: str | None = None
    type: TransitionType | None = None
    actions: tuple[Action, ...] = ()

    def _element(self, tree: Tree) -> XNode:
        attrs = {"event": self.event, "cond": self.cond, "target": self.target, "type": self.type}
        return tree.element(self.origin, "transition", attrs, self.actions)


def transition(
    *actions: Action,
    event: str | Sequence[str] | None = None,
    cond: Expr | None = None,
    target: str | Sequence[str] | None = None,
    type: TransitionType | None = None,
) -> Transition:
    """``<transition>``: ``event`` is one or more event descriptors (``"capture.*"``,
    ``"*"``, a sequence or a space-separated string; None for an eventless transition),
    ``cond`` a condition, ``target`` one or more state ids (None for a targetless
    transition, which runs its actions and stays), ``type`` ``"internal"`` or
    ``"external"`` (None leaves the attribute out: external)."""
    return Transition(
        origin=caller(),
        event=words(event),
        cond=source(cond),
        target=words(target),
        type=type,
        actions=actions,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class OnEntry(Node):
    """``<onentry>``: actions run when the state is entered."""

    actions: tuple[Action, ...]

    def _element(self, tree: Tree) -> XNode:
        return tree.element(self.origin, "onentry", {}, self.actions)


def on_entry(*actions: Action) -> OnEntry:
    """``<onentry>`` running ``actions`` in order."""
    return OnEntry(origin=caller(), actions=actions)


@dataclass(frozen=True, slots=True, kw_only=True)
class OnExit(Node):
    """``<onexit>``: actions run when the state is left."""

    actions: tuple[Action, ...]

    def _element(self, tree: Tree) -> XNode:
        return tree.element(self.origin, "onexit", {}, self.actions)


def on_exit(*actions: Action) -> OnExit:
    """``<onexit>`` running ``actions`` in order."""
    return OnExit(origin=caller(), actions=actions)


@dataclass(frozen=True, slots=True, kw_only=True)
class Initial(Node):
    """``<initial>``: a compound state's initial transition, with actions of its own."""

    transition: Transition

    def _element(self, tree: Tree) -> XNode:
        return tree.element(self.origin, "initial", {}, (self.transition,))


def initial(transition: Transition, /) -> Initial:
    """``<initial>`` holding ``transition`` (a target inside the state, no event or
    condition). For a plain initial child, ``state(..., initial="id")`` says it shorter."""
    return Initial(origin=caller(), transition=transition)


@dataclass(frozen=True, slots=True, kw_only=True)
class History(Node):
    """``<history>``: a pseudo-state that re-enters what its parent had active when it was
    last left, or follows its default transition the first time."""

    id: str | None
    type: HistoryType | None = None
    children: tuple[Transition, ...] = ()

    def _element(self, tree: Tree) -> XNode:
        return tree.element(
            self.origin, "history", {"id": self.id, "type": self.type}, self.children
        )


def history(id: str | None, /, *default: Transition, type: HistoryType | None = None) -> History:
    """``<history id type>`` with its ``default`` transition; ``type`` is ``"shallow"``
    (None leaves the attribute out: shallow) or ``"deep"``."""
    origin = caller()
    return History(origin=origin, id=_id(id, origin), type=type, children=default)


@dataclass(frozen=True, slots=True, kw_only=True)
class Final(Node):
    """``<final>``: a top-level one ends the chart; one in a compound state raises
    ``done.state.<parent>``."""

    id: str | None
    children: tuple[FinalChild, ...]

    def _element(self, tree: Tree) -> XNode:
        return tree.element(self.origin, "final", {"id": self.id}, self.children)


def final(id: str | None = None, /, *children: FinalChild) -> Final:
    """``<final id>`` with ``on_entry``, ``on_exit`` and ``done_data``."""
    origin = caller()
    return Final(origin=origin, id=_id(id, origin), children=children)


@dataclass(frozen=True, slots=True, kw_only=True)
class State(Node):
    """``<state>``: atomic, or compound when it has child states."""

    id: str | None
    initial: str | None = None
    children: tuple[StateChild, ...] = ()

    def _element(self, tree: Tree) -> XNode:
        return tree.element(
            self.origin, "state", {"id": self.id, "initial": self.initial}, self.children
        )


def state(
    id: str | None = None, /, *children: StateChild, initial: str | Sequence[str] | None = None
) -> State:
    """``<state id>`` with its children in document order (which is the order transitions
    are tried and actions run in). ``initial`` names the initial child (or children of
    parallel descendants); by default the first child state is entered."""
    origin = caller()
    return State(origin=origin, id=_id(id, origin), initial=words(initial), children=children)


@dataclass(frozen=True, slots=True, kw_only=True)
class Parallel(Node):
    """``<parallel>``: every child state is active at once."""

    id: str | None
    children: tuple[ParallelChild, ...] = ()

    def _element(self, tree: Tree) -> XNode:
        return tree.element(self.origin, "parallel", {"id": self.id}, self.children)


def parallel(id: str | None = None, /, *children: ParallelChild) -> Parallel:
    """``<parallel id>``: its child states (regions) are all active while it is."""
    origin = caller()
    return Parallel(origin=origin, id=_id(id, origin), children=children)


def _id(value: object, origin: Origin) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise BuildError(
        origin, f"a state's id is a string (or None), not {brief(value)}: pass it first"
    )


type StateChild = (
    State | Parallel | Final | History | Initial | Transition | OnEntry | OnExit | Data | Invoke
)
"""What a ``state`` holds."""

type ParallelChild = State | Parallel | History | Transition | OnEntry | OnExit | Data | Invoke
"""What a ``parallel`` holds."""

type FinalChild = OnEntry | OnExit | DoneData
"""What a ``final`` holds."""
