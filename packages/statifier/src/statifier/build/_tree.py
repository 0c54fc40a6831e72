"""The element tree a built chart becomes: the compiler's own ``XNode`` tree, each element
mapped to the origin of the builder call that made it.

Exporting a chart turns its nodes into that tree once; the SCXML text is written from it
(``_scxml``), and the compiler reads the text, so a built chart and its exported SCXML are
the same chart by construction.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from statifier.chart.xmltree import MAX_DEPTH, SCXML_NS, XNode
from statifier.values import brief

from ._origin import BuildError, Origin


@dataclass(frozen=True, slots=True, kw_only=True)
class Node(ABC):
    """An element of a built chart (a state, a transition, an action...), made by one of
    the functions of ``statifier.build`` and immutable. ``origin`` is the Python line that
    made it; it is not part of the element's value (two calls that make the same element
    on different lines make equal elements)."""

    grouped_in: ClassVar[str | None] = None
    """The wrapper element that consecutive siblings of this kind share (``<datamodel>``
    for ``<data>``), or None."""

    origin: Origin = field(compare=False)

    @abstractmethod
    def _element(self, tree: Tree) -> XNode:
        """This node as an element of ``tree``."""


@dataclass(frozen=True, slots=True)
class Markup:
    """Inline XML made by ``xml()``: the elements and the text runs between them, as the
    chart's ``<content>``, ``<data>`` or ``<assign>`` holds them."""

    nodes: tuple[XNode, ...]
    texts: tuple[str, ...]
    origin: Origin = field(compare=False)


class Tree:
    """Builds the elements of one export and remembers where each was made."""

    def __init__(self) -> None:
        self.origins: dict[int, Origin] = {}
        self.verbatim: set[int] = set()
        """Elements whose text is part of a value (inline markup): written as they are."""
        self._depth = 0

    def element(
        self,
        origin: Origin,
        tag: str,
        attrs: Mapping[str, str | None],
        children: Iterable[Node] = (),
        *,
        text: str = "",
        markup: Markup | None = None,
    ) -> XNode:
        """An SCXML element made at ``origin``: the attributes that are not None, ``text``,
        the children's elements, then a copy of ``markup``."""
        element = XNode(
            SCXML_NS,
            tag,
            {(None, name): value for name, value in attrs.items() if value is not None},
            0,
            0,
        )
        self.origins[id(element)] = origin
        element.children = self._elements(children, origin)
        element.texts = [text] + [""] * len(element.children)
        if markup is not None:
            self.verbatim.add(id(element))
            element.children += [self._copy(child, markup.origin) for child in markup.nodes]
            element.texts[-1] += markup.texts[0]
            element.texts += markup.texts[1:]
        return element

    def _elements(self, children: Iterable[Node], parent: Origin) -> list[XNode]:
        # The children are at depth ``_depth + 1`` (the root at 1): deeper than the parser
        # takes (``MAX_DEPTH``) is refused here, before the recursion goes deeper still.
        self._depth += 1
        try:
            elements: list[XNode] = []
            wrapper: XNode | None = None
            for child in children:
                if self._depth >= MAX_DEPTH:
                    raise BuildError(
                        parent, f"elements are nested more than {MAX_DEPTH} levels deep"
                    )
                if not isinstance(child, Node):
                    raise BuildError(parent, f"{brief(child)} is not an element of a chart")
                group = child.grouped_in
                if group is None:
                    wrapper = None
                    elements.append(child._element(self))
                    continue
                if wrapper is None or wrapper.tag != group:
                    wrapper = XNode(SCXML_NS, group, {}, 0, 0, [], [""])
                    self.origins[id(wrapper)] = child.origin
                    elements.append(wrapper)
                wrapper.children.append(child._element(self))
                wrapper.texts.append("")
            return elements
        finally:
            self._depth -= 1

    def _copy(self, node: XNode, origin: Origin) -> XNode:
        copy = XNode(node.ns, node.tag, dict(node.attrs), 0, 0, [], list(node.texts))
        self.origins[id(copy)] = origin
        self.verbatim.add(id(copy))
        copy.children = [self._copy(child, origin) for child in node.children]
        return copy
