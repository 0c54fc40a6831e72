"""Python builder code (``statifier.build``) written from a parsed SCXML chart.

``builder_code(source)`` is the text of a module that builds the same chart: one builder
call per element, every attribute a keyword (or the positional argument the builder takes),
inline values as Python literals, inline markup through ``sc.xml``, inline child charts as
nested ``sc.chart`` calls. Comments and whitespace between elements are left out (they are
not part of a chart's identity). Anything the builder cannot say (an unknown attribute, an
empty ``<datamodel>``...) raises ``Unrepresentable`` instead of being dropped, so a round
trip that passes is a round trip of the whole chart.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

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
        self.taken: set[str] = set()

    def positional(self, attribute: str, *, optional: bool = False) -> None:
        value = self.node.attr(attribute)
        if value is None and not optional:
            raise Unrepresentable(f"<{self.node.tag}> without {attribute}")
        self.taken.add(attribute)
        self.args.append(repr(value))

    def keyword(self, *attributes: str, convert: Callable[[str], str] = repr) -> None:
        for attribute in attributes:
            value = self.node.attr(attribute)
            self.taken.add(attribute)
            if value is not None:
                self.keywords.append((attribute, convert(value)))

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
        node = self.node
        extra = {name for ns, name in node.attrs if ns is None} - self.taken
        foreign = [name for ns, name in node.attrs if ns is not None]
        if extra or foreign:
            raise Unrepresentable(f"<{node.tag}> attributes {sorted(extra)} {foreign}")
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


def _call(node: XNode, indent: str) -> str:  # noqa: C901 - one branch per SCXML element
    if node.ns != SCXML_NS:
        raise Unrepresentable(f"element {node.tag!r} in namespace {node.ns!r} outside a value")
    tag = node.tag
    if tag not in ("data", "assign", "content", "script") and node.text.strip():
        raise Unrepresentable(f"text in <{tag}>")
    if tag == "if":
        return _if(node, indent)
    call = _Call(node, _FUNCTIONS.get(tag, tag))
    call.children = list(node.children)
    if tag == "scxml":
        if node.attr("version") != "1.0":
            raise Unrepresentable("an <scxml> without version 1.0")
        call.taken.add("version")
        call.keyword("name", "initial", "datamodel", "binding")
    elif tag in ("state", "parallel", "final", "history"):
        call.positional("id", optional=True)
        call.keyword(*_KEYWORDS.get(tag, ()))
    elif tag == "initial":
        if len(node.children) != 1:
            raise Unrepresentable("an <initial> without exactly one transition")
    elif tag == "transition":
        call.keyword("event", "cond", "target", "type")
    elif tag == "data":
        call.positional("id")
        call.keyword("expr", "src")
        call.children = []
        call.body()
    elif tag == "param":
        call.positional("name")
        call.keyword("expr", "location")
    elif tag in ("content", "assign"):
        if tag == "assign":
            call.positional("location")
        call.keyword("expr")
        call.children = []
        call.body()
    elif tag == "raise":
        call.positional("event")
    elif tag == "cancel":
        if node.attr("sendid") is not None:
            call.positional("sendid")
        call.keyword("sendidexpr")
    elif tag == "script":
        if node.children:
            raise Unrepresentable("elements in a <script>")
        if node.text.strip():
            call.args.append(repr(node.text))
        call.keyword("src")
    elif tag == "invoke":
        call.keyword("type", "typeexpr", "src", "srcexpr", "id", "idlocation", "namelist")
        call.keyword("autoforward", convert=_boolean)
    elif tag in ("send", "foreach", "log"):
        call.keyword(*_KEYWORDS[tag])
    elif tag not in ("onentry", "onexit", "donedata", "finalize"):
        raise Unrepresentable(f"<{tag}>")
    return call.write(indent)


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

_KEYWORDS = {
    "state": ("initial",),
    "history": ("type",),
    "send": (
        "event",
        "eventexpr",
        "target",
        "targetexpr",
        "type",
        "typeexpr",
        "id",
        "idlocation",
        "delay",
        "delayexpr",
        "namelist",
    ),
    "foreach": ("array", "item", "index"),
    "log": ("label", "expr"),
}
