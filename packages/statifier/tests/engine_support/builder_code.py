"""Python builder code (``statifier.build``) written from a parsed SCXML chart.

``builder_code(source)`` is the text of a module that builds the same chart: one builder
call per element, every attribute a keyword (or the positional argument the builder takes),
inline values as Python literals, inline markup through ``sc.xml``, inline child charts as
nested ``sc.chart`` calls. Comments and whitespace between elements are left out (they are
not part of a chart's identity). Anything the builder cannot say (an empty ``<datamodel>``,
an element with no builder...) raises ``Unrepresentable``, and an attribute the builder
does not take becomes a keyword its call refuses: nothing is dropped, so a round trip that
passes is a round trip of the whole chart.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from statifier import build as sc
from statifier.build._scxml import fragment
from statifier.chart.xmltree import SCXML_NS, XNode, parse
from statifier.datamodel.python import parse_inline_content

_INDENT = "    "
_WIDTH = 88


class Unrepresentable(ValueError):
    """The chart has something the builder cannot write."""


def builder_code(source: str | bytes, *, name: str = "CHART") -> str:
    """The text of a module whose ``name`` is the chart of ``source`` built in Python."""
    raw = source.encode("utf-8") if isinstance(source, str) else source
    root = parse(raw)
    return f"from statifier import build as sc\n\n{name} = {_call(root, '')}\n"


def literal(value: Any) -> str:
    """A Python literal of a JSON-like value (``float("nan")`` for what repr cannot write)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f'float("{value}")'
    if isinstance(value, list):
        return "[" + ", ".join(literal(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key!r}: {literal(item)}" for key, item in value.items()) + "}"
    return repr(value)


class _Call:
    """One builder call being written: positional arguments, child calls, keywords."""

    def __init__(self, node: XNode, function: str) -> None:
        self.node = node
        self.function = function
        self.args: list[str] = []
        self.keywords: list[tuple[str, str]] = []
        self.children: list[XNode] = []
        self.chart: XNode | None = None

    def body(self) -> None:
        """The element's body as ``value=`` (inline text), ``markup=`` or ``chart=``."""
        node = self.node
        if not node.children:
            if node.text.strip():
                self.keywords.append(("value", literal(parse_inline_content(node.text))))
            return
        only = node.children[0]
        if (
            node.tag == "content"
            and len(node.children) == 1
            and only.is_scxml("scxml")
            and not node.text.strip()
        ):
            self.chart = only
            return
        markup = fragment(node.children, node.texts)
        self.keywords.append(("markup", f"sc.xml({markup!r})"))

    def write(self, indent: str) -> str:
        inner = indent + _INDENT
        parts = [*self.args]
        parts += [_call(child, inner) for child in _flattened(self.children)]
        parts += [f"{key}={value}" for key, value in self.keywords]
        if self.chart is not None:
            parts.append(f"chart={_call(self.chart, inner)}")
        return _arguments(f"sc.{self.function}", parts, indent)


def _arguments(function: str, parts: list[str], indent: str) -> str:
    """``function(parts)`` on one line when it is short, else one argument a line."""
    flat = f"{function}({', '.join(parts)})"
    if "\n" not in flat and len(indent) + len(flat) <= _WIDTH:
        return flat
    inner = indent + _INDENT
    lines = "".join(f"{inner}{part},\n" for part in parts)
    return f"{function}(\n{lines}{indent})"


def _flattened(children: list[XNode]) -> Iterator[XNode]:
    """Children with each ``<datamodel>`` replaced by its ``<data>`` (the builder groups
    consecutive ``data`` into one again)."""
    previous: XNode | None = None
    for child in children:
        if child.is_scxml("datamodel"):
            if not child.children or child.attrs or child.text.strip():
                raise Unrepresentable("a <datamodel> that is empty or has attributes or text")
            if previous is not None and previous.is_scxml("datamodel"):
                raise Unrepresentable("two <datamodel> in a row")
            yield from child.children
        else:
            yield child
        previous = child


def _call(node: XNode, indent: str) -> str:
    """The builder call of ``node``: its positional argument (an id, a name, a location, an
    event, a script body), its children, every other attribute as the keyword of its name,
    its body as ``value=``, ``markup=`` or ``chart=``."""
    tag = node.tag
    if node.is_scxml("if"):
        return _if(node, indent)
    function = _FUNCTIONS.get(tag, tag)
    _check(node, function)
    attrs = {name: value for (_, name), value in node.attrs.items()}
    if tag == "scxml" and attrs.pop("version", None) != "1.0":
        raise Unrepresentable("an <scxml> without version 1.0 (the builder always writes it)")
    call = _Call(node, function)
    if tag in _POSITIONAL:
        name, required = _POSITIONAL[tag]
        value = attrs.pop(name, None)
        if value is None and required:
            raise Unrepresentable(f"<{tag}> without {name}")
        if value is not None or tag != "cancel":
            call.args.append(repr(value))
    if tag == "script" and node.text.strip():
        call.args.append(repr(node.text))
    call.keywords = [
        (name, _boolean(value) if name == "autoforward" else repr(value))
        for name, value in attrs.items()
    ]
    if tag in _BODIES:
        call.body()
    else:
        call.children = list(node.children)
    if tag == "initial" and len(node.children) != 1:
        raise Unrepresentable("an <initial> without exactly one transition")
    return call.write(indent)


def _check(node: XNode, function: str) -> None:
    """Raise ``Unrepresentable`` for an element the builder cannot write as ``function``."""
    tag = node.tag
    if node.ns != SCXML_NS:
        raise Unrepresentable(f"element {tag!r} in namespace {node.ns!r} outside a value")
    if tag in ("elseif", "else") or not callable(getattr(sc, function, None)):
        raise Unrepresentable(f"<{tag}> is not a builder element here")
    if node.text.strip() and tag not in (*_BODIES, "script"):
        raise Unrepresentable(f"text in <{tag}>")
    if any(ns is not None for ns, _ in node.attrs):
        raise Unrepresentable(f"<{tag}> has a namespaced attribute")


def _if(node: XNode, indent: str) -> str:
    """``sc.if_(cond, ...)`` then ``.elseif(cond, ...)`` / ``.else_(...)`` per branch."""
    branches: list[tuple[XNode, list[XNode]]] = [(node, [])]
    for child in node.children:
        if child.is_scxml("elseif") or child.is_scxml("else"):
            branches.append((child, []))
        else:
            branches[-1][1].append(child)
    pieces: list[str] = []
    for position, (head, actions) in enumerate(branches):
        function = (
            "sc.if_" if position == 0 else ("." + ("else_" if head.tag == "else" else "elseif"))
        )
        allowed = {(None, "cond")} if head.tag != "else" else set()
        if set(head.attrs) - allowed:
            raise Unrepresentable(f"<{head.tag}> attributes {list(head.attrs)}")
        inner = indent + _INDENT
        parts = [] if head.tag == "else" else [repr(head.attr("cond") or "")]
        if head.tag != "else" and head.attr("cond") is None:
            raise Unrepresentable(f"<{head.tag}> without cond")
        parts += [_call(action, inner) for action in actions]
        pieces.append(_arguments(function, parts, indent))
    return "".join(pieces)


def _boolean(value: str) -> str:
    if value not in ("true", "false"):
        raise Unrepresentable(f"autoforward={value!r}")
    return "True" if value == "true" else "False"


_FUNCTIONS = {
    "scxml": "chart",
    "onentry": "on_entry",
    "onexit": "on_exit",
    "donedata": "done_data",
    "raise": "raise_",
}

_POSITIONAL = {
    "state": ("id", False),
    "parallel": ("id", False),
    "final": ("id", False),
    "history": ("id", False),
    "data": ("id", True),
    "param": ("name", True),
    "assign": ("location", True),
    "raise": ("event", True),
    "cancel": ("sendid", False),
}
"""The attribute a builder takes as its first, positional argument (and whether it must
be there)."""

_BODIES = ("data", "assign", "content")
"""The elements whose body is a value (``value=``, ``markup=``, ``chart=``)."""
