"""Executable content: ``raise_``, ``log``, ``assign``, ``send``, ``cancel``, ``script``,
``if_`` (with ``.elseif()`` and ``.else_()``) and ``foreach``, the actions of
``on_entry``, ``on_exit``, transitions and ``finalize``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, overload

from statifier.chart.durations import format_duration
from statifier.chart.xmltree import XNode

from ._data import UNSET, Content, Param, inline_text
from ._expressions import Expr, source, words
from ._origin import BuildError, Origin, caller
from ._tree import Markup, Node, Tree
from ._values import JSONValue


@dataclass(frozen=True, slots=True, kw_only=True)
class Raise(Node):
    """``<raise event>``: an internal event."""

    event: str

    def _element(self, tree: Tree) -> XNode:
        return tree.element(self.origin, "raise", {"event": self.event})


def raise_(event: str, /) -> Raise:
    """``<raise event>``: put ``event`` on the internal queue."""
    return Raise(origin=caller(), event=event)


@dataclass(frozen=True, slots=True, kw_only=True)
class Log(Node):
    """``<log label expr>``."""

    label: str | None = None
    expr: str | None = None

    def _element(self, tree: Tree) -> XNode:
        return tree.element(self.origin, "log", {"label": self.label, "expr": self.expr})


def log(*, label: str | None = None, expr: Expr | None = None) -> Log:
    """``<log>``: a ``Log`` effect with ``label`` and the value of ``expr``."""
    return Log(origin=caller(), label=label, expr=source(expr))


@dataclass(frozen=True, slots=True, kw_only=True)
class Assign(Node):
    """``<assign location>`` with an expression or an inline value."""

    location: str
    expr: str | None = None
    text: str = ""
    markup: Markup | None = None

    def _element(self, tree: Tree) -> XNode:
        attrs = {"location": self.location, "expr": self.expr}
        return tree.element(self.origin, "assign", attrs, text=self.text, markup=self.markup)


@overload
def assign(location: str, /, *, expr: Expr) -> Assign: ...
@overload
def assign(location: str, /, *, value: JSONValue) -> Assign: ...
@overload
def assign(location: str, /, *, markup: Markup) -> Assign: ...
def assign(
    location: str, /, *, expr: Expr | None = None, value: Any = UNSET, markup: Markup | None = None
) -> Assign:
    """``<assign location>``: write the value of ``expr`` (or an inline ``value``, or
    ``markup``) to ``location``."""
    origin = caller()
    text = inline_text(origin, value, markup)
    return Assign(origin=origin, location=location, expr=source(expr), text=text, markup=markup)


@dataclass(frozen=True, slots=True, kw_only=True)
class Send(Node):
    """``<send>``: an event to the chart itself (later), its parent, an invoked child or
    another processor."""

    attrs: tuple[tuple[str, str | None], ...]
    children: tuple[Param | Content, ...]

    def _element(self, tree: Tree) -> XNode:
        return tree.element(self.origin, "send", dict(self.attrs), self.children)


def send(
    *children: Param | Content,
    event: str | None = None,
    eventexpr: Expr | None = None,
    target: str | None = None,
    targetexpr: Expr | None = None,
    type: str | None = None,
    typeexpr: Expr | None = None,
    id: str | None = None,
    idlocation: str | None = None,
    delay: str | timedelta | None = None,
    delayexpr: Expr | None = None,
    namelist: str | Sequence[str] | None = None,
) -> Send:
    """``<send>`` with the given attributes and ``param``s (or one ``content``) as children.

    ``delay`` is a duration (``"7d"``, ``"250ms"``) or a ``timedelta`` of whole
    milliseconds; ``namelist`` names variables (a space-separated string or a sequence).
    """
    origin = caller()
    attrs = {
        "event": event,
        "eventexpr": source(eventexpr),
        "target": target,
        "targetexpr": source(targetexpr),
        "type": type,
        "typeexpr": source(typeexpr),
        "id": id,
        "idlocation": idlocation,
        "delay": _delay(delay, origin),
        "delayexpr": source(delayexpr),
        "namelist": words(namelist),
    }
    return Send(origin=origin, attrs=tuple(attrs.items()), children=children)


_MILLISECOND = timedelta(milliseconds=1)


def _delay(delay: str | timedelta | None, origin: Origin) -> str | None:
    if not isinstance(delay, timedelta):
        return delay
    if delay < timedelta(0):
        raise BuildError(origin, f"delay {delay} is negative")
    if delay % _MILLISECOND:
        raise BuildError(origin, f"delay {delay} is not a whole number of milliseconds")
    return format_duration(delay // _MILLISECOND)


@dataclass(frozen=True, slots=True, kw_only=True)
class Cancel(Node):
    """``<cancel>``: take back a delayed ``send`` by its id."""

    sendid: str | None = None
    sendidexpr: str | None = None

    def _element(self, tree: Tree) -> XNode:
        attrs = {"sendid": self.sendid, "sendidexpr": self.sendidexpr}
        return tree.element(self.origin, "cancel", attrs)


@overload
def cancel(sendid: str, /) -> Cancel: ...
@overload
def cancel(*, sendidexpr: Expr) -> Cancel: ...
def cancel(sendid: str | None = None, /, *, sendidexpr: Expr | None = None) -> Cancel:
    """``<cancel>`` of the send ``sendid`` (or of the id ``sendidexpr`` evaluates to)."""
    return Cancel(origin=caller(), sendid=sendid, sendidexpr=source(sendidexpr))


@dataclass(frozen=True, slots=True, kw_only=True)
class Script(Node):
    """``<script>``: statements in the chart's datamodel, or a document fetched by ``src``."""

    body: str = ""
    src: str | None = None

    def _element(self, tree: Tree) -> XNode:
        return tree.element(self.origin, "script", {"src": self.src}, text=self.body)


@overload
def script(body: str, /) -> Script: ...
@overload
def script(*, src: str) -> Script: ...
def script(body: str = "", /, *, src: str | None = None) -> Script:
    """``<script>`` running ``body`` (dedented, so a triple-quoted block may be indented
    as the Python around it), or the script fetched from ``src`` at compile time."""
    return Script(origin=caller(), body=body, src=src)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Branch(Node):
    """An ``<elseif cond>`` (or, without a condition, ``<else>``) and the actions after it."""

    cond: str | None
    actions: tuple[Action, ...]

    def _element(self, tree: Tree) -> XNode:
        if self.cond is None:
            return tree.element(self.origin, "else", {})
        return tree.element(self.origin, "elseif", {"cond": self.cond})


@dataclass(frozen=True, slots=True, kw_only=True)
class If(Node):
    """``<if>``: the actions of the first branch whose condition holds. Made by ``if_()``,
    extended by ``.elseif()`` and ``.else_()``."""

    cond: str
    actions: tuple[Action, ...]
    branches: tuple[_Branch, ...] = ()

    def elseif(self, cond: Expr, /, *actions: Action) -> If:
        """This ``if`` with one more branch, taken when ``cond`` holds and none before did."""
        branch = _Branch(origin=caller(), cond=source(cond), actions=actions)
        return If(
            origin=self.origin,
            cond=self.cond,
            actions=self.actions,
            branches=(*self.branches, branch),
        )

    def else_(self, *actions: Action) -> If:
        """This ``if`` with the branch taken when no condition held."""
        branch = _Branch(origin=caller(), cond=None, actions=actions)
        return If(
            origin=self.origin,
            cond=self.cond,
            actions=self.actions,
            branches=(*self.branches, branch),
        )

    def _element(self, tree: Tree) -> XNode:
        children: list[Node] = list(self.actions)
        for branch in self.branches:
            children.append(branch)
            children.extend(branch.actions)
        return tree.element(self.origin, "if", {"cond": self.cond}, children)


def if_(cond: Expr, /, *actions: Action) -> If:
    """``<if cond>``: run ``actions`` when ``cond`` holds; chain ``.elseif(cond, ...)`` and
    ``.else_(...)`` for the other branches."""
    return If(origin=caller(), cond=str(cond), actions=actions)


@dataclass(frozen=True, slots=True, kw_only=True)
class Foreach(Node):
    """``<foreach array item index>``: the actions once per item of a shallow copy of the
    array."""

    array: str
    item: str
    index: str | None
    actions: tuple[Action, ...]

    def _element(self, tree: Tree) -> XNode:
        attrs = {"array": self.array, "item": self.item, "index": self.index}
        return tree.element(self.origin, "foreach", attrs, self.actions)


def foreach(*actions: Action, array: Expr, item: str, index: str | None = None) -> Foreach:
    """``<foreach>``: run ``actions`` with ``item`` (and ``index``) bound to each element
    of ``array``."""
    return Foreach(origin=caller(), array=str(array), item=item, index=index, actions=actions)


type Action = Raise | Log | Assign | Send | Cancel | Script | If | Foreach
"""Executable content: what ``on_entry``, ``on_exit``, a transition, ``finalize``, an
``if_`` branch and ``foreach`` hold."""
