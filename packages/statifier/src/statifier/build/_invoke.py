"""``invoke`` (with ``param``s, ``content``, ``finalize`` and autoforward) and ``finalize``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from statifier.chart.xmltree import XNode

from ._actions import Action
from ._data import Content, Param
from ._expressions import Expr, source, words
from ._origin import caller
from ._tree import Node, Tree


@dataclass(frozen=True, slots=True, kw_only=True)
class Finalize(Node):
    """``<finalize>``: actions run on each event from the invoked child, before the
    chart's transitions see it."""

    actions: tuple[Action, ...]

    def _element(self, tree: Tree) -> XNode:
        return tree.element(self.origin, "finalize", {}, self.actions)


def finalize(*actions: Action) -> Finalize:
    """``<finalize>`` running ``actions`` (no ``raise_`` or ``send``: the compiler refuses
    them)."""
    return Finalize(origin=caller(), actions=actions)


@dataclass(frozen=True, slots=True, kw_only=True)
class Invoke(Node):
    """``<invoke>``: a child service, started when its state is entered and cancelled when
    it is left."""

    attrs: tuple[tuple[str, str | None], ...]
    children: tuple[Param | Content | Finalize, ...]

    def _element(self, tree: Tree) -> XNode:
        return tree.element(self.origin, "invoke", dict(self.attrs), self.children)


def invoke(
    *children: Param | Content | Finalize,
    type: str | None = None,
    typeexpr: Expr | None = None,
    src: str | None = None,
    srcexpr: Expr | None = None,
    id: str | None = None,
    idlocation: str | None = None,
    namelist: str | Sequence[str] | None = None,
    autoforward: bool | None = None,
) -> Invoke:
    """``<invoke>`` of a service ``type`` (``"scxml"``, ``"statifier:map"``, a type the
    host registered) with ``param``s, an inline ``content(chart=...)`` or ``src``, and a
    ``finalize``. ``autoforward=True`` forwards every external event to the child;
    ``None`` leaves the attribute out (``False`` writes it)."""
    attrs = {
        "type": type,
        "typeexpr": source(typeexpr),
        "src": src,
        "srcexpr": source(srcexpr),
        "id": id,
        "idlocation": idlocation,
        "namelist": words(namelist),
        "autoforward": None if autoforward is None else ("true" if autoforward else "false"),
    }
    return Invoke(origin=caller(), attrs=tuple(attrs.items()), children=children)
