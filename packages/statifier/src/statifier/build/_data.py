"""The datamodel and the values elements carry: ``data``, ``param``, ``content`` and
``done_data``.

A value-bearing element takes exactly one way of giving its value (the overloads say
which): an expression (``expr=``), a JSON-like value written inline (``value=``), inline
XML (``markup=xml(...)``), a document fetched when the chart is compiled (``src=``, for
``data``), or a whole child chart (``chart=``, for the ``content`` of an ``invoke``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final, overload

from statifier.chart.xmltree import XNode

from ._expressions import Expr, source
from ._origin import BuildError, Origin, caller
from ._tree import Markup, Node, Tree
from ._values import JSONValue, value_text

if TYPE_CHECKING:
    from ._chart import Chart


class _Unset:
    """No ``value=`` was given (``value=None`` writes ``null``)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final[Any] = _Unset()


def inline_text(origin: Origin, value: Any, *inline: object) -> str:
    """The inline text of ``value`` ("" when it is UNSET); raises ``BuildError`` when the
    element is also given inline markup or a chart (in the SCXML both are the element's
    body, and only one can be its value)."""
    given = (value is not UNSET) + sum(item is not None for item in inline)
    if given > 1:
        raise BuildError(origin, "give at most one of value=, markup= and chart=")
    return "" if value is UNSET else value_text(value, origin)


@dataclass(frozen=True, slots=True, kw_only=True)
class Data(Node):
    """``<data>``: a variable of the datamodel. Consecutive ``data`` among a state's (or
    the chart's) children share one ``<datamodel>``."""

    grouped_in: ClassVar[str | None] = "datamodel"

    id: str
    expr: str | None = None
    src: str | None = None
    text: str = ""
    markup: Markup | None = None

    def _element(self, tree: Tree) -> XNode:
        attrs = {"id": self.id, "expr": self.expr, "src": self.src}
        return tree.element(self.origin, "data", attrs, text=self.text, markup=self.markup)


@overload
def data(id: str, /) -> Data: ...
@overload
def data(id: str, /, *, expr: Expr) -> Data: ...
@overload
def data(id: str, /, *, src: str) -> Data: ...
@overload
def data(id: str, /, *, value: JSONValue) -> Data: ...
@overload
def data(id: str, /, *, markup: Markup) -> Data: ...
def data(
    id: str,
    /,
    *,
    expr: Expr | None = None,
    src: str | None = None,
    value: Any = UNSET,
    markup: Markup | None = None,
) -> Data:
    """``<data id>``: a variable, unbound (``None``) or initialised by ``expr``, ``src``,
    an inline ``value`` or ``markup``."""
    origin = caller()
    text = inline_text(origin, value, markup)
    return Data(origin=origin, id=id, expr=source(expr), src=src, text=text, markup=markup)


@dataclass(frozen=True, slots=True, kw_only=True)
class Param(Node):
    """``<param>``: a named value of a ``send``, an ``invoke`` or ``done_data``."""

    name: str
    expr: str | None = None
    location: str | None = None

    def _element(self, tree: Tree) -> XNode:
        attrs = {"name": self.name, "expr": self.expr, "location": self.location}
        return tree.element(self.origin, "param", attrs)


@overload
def param(name: str, /, *, expr: Expr) -> Param: ...
@overload
def param(name: str, /, *, location: str) -> Param: ...
def param(name: str, /, *, expr: Expr | None = None, location: str | None = None) -> Param:
    """``<param name>`` whose value is ``expr`` or the value at ``location``."""
    return Param(origin=caller(), name=name, expr=source(expr), location=location)


@dataclass(frozen=True, slots=True, kw_only=True)
class Content(Node):
    """``<content>``: the payload of a ``send``, the document of an ``invoke``, the result
    of ``done_data``."""

    expr: str | None = None
    text: str = ""
    markup: Markup | None = None
    chart: Chart | None = None

    def _element(self, tree: Tree) -> XNode:
        children = () if self.chart is None else (self.chart,)
        attrs = {"expr": self.expr}
        return tree.element(
            self.origin, "content", attrs, children, text=self.text, markup=self.markup
        )


@overload
def content(*, expr: Expr) -> Content: ...
@overload
def content(*, value: JSONValue) -> Content: ...
@overload
def content(*, markup: Markup) -> Content: ...
@overload
def content(*, chart: Chart) -> Content: ...
def content(
    *,
    expr: Expr | None = None,
    value: Any = UNSET,
    markup: Markup | None = None,
    chart: Chart | None = None,
) -> Content:
    """``<content>`` given by ``expr``, an inline ``value``, ``markup``, or a ``chart`` (an
    inline child chart for an ``invoke``)."""
    origin = caller()
    text = inline_text(origin, value, markup, chart)
    return Content(origin=origin, expr=source(expr), text=text, markup=markup, chart=chart)


@dataclass(frozen=True, slots=True, kw_only=True)
class DoneData(Node):
    """``<donedata>``: what a ``final`` state reports in its ``done.state`` event."""

    children: tuple[Param | Content, ...]

    def _element(self, tree: Tree) -> XNode:
        return tree.element(self.origin, "donedata", {}, self.children)


def done_data(*children: Param | Content) -> DoneData:
    """``<donedata>`` of ``param``s, or of one ``content``."""
    return DoneData(origin=caller(), children=children)
