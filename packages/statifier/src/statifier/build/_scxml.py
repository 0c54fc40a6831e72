"""Writes a built chart's element tree as SCXML text, and remembers which Python line made
the element at each position of it.

Elements the builder made are indented one per line; inline markup (``xml()``) and any
element with text between its children are written exactly as they are, since that text
is part of their value. The compiler reads the text; a diagnostic at a line and column of
it is mapped back (``Exported.locate``) to the builder call that made the element there.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from xml.sax.saxutils import quoteattr

from statifier.chart.xmltree import SCXML_NS, XNode
from statifier.errors import Diagnostic
from statifier.values import brief

from ._origin import UNKNOWN, BuildError, Origin

XML_NS = "http://www.w3.org/XML/1998/namespace"
_HEADER = '<?xml version="1.0" encoding="UTF-8"?>\n'
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_BLANK = " \t\r\n"
_TEXT_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})


@dataclass(frozen=True, slots=True)
class Exported:
    """A built chart as SCXML ``text``, with the origin of the element at each position."""

    text: str
    positions: tuple[tuple[int, int], ...]
    """(line, column) of each element's start tag in ``text``, in document order."""
    origins: tuple[Origin, ...]
    """The origin of the element at each of ``positions``."""

    def origin_at(self, line: int, column: int = 0) -> Origin:
        """The origin of the element whose start tag is at or last before the position (the
        chart's for a position before the root, or 0 for unknown)."""
        found = bisect.bisect_right(self.positions, (line, column if column else 1 << 30))
        return self.origins[max(found - 1, 0)]

    def locate(self, diagnostic: Diagnostic) -> Diagnostic:
        """``diagnostic`` (about ``text``, as the compiler or ``lint`` reports it) at the
        Python line that made its element."""
        if diagnostic.file is not None:
            return diagnostic
        origin = self.origin_at(diagnostic.line, diagnostic.column)
        return Diagnostic(
            diagnostic.code,
            diagnostic.message,
            origin.line,
            origin.column,
            diagnostic.severity,
            origin.file,
        )


def write(root: XNode, origins: dict[int, Origin], verbatim: set[int]) -> Exported:
    """The SCXML text of ``root``; ``origins`` by ``id()`` of each element, ``verbatim`` the
    ``id()``s of elements written exactly as they are (inline markup)."""
    writer = _Writer(origins, verbatim)
    writer.put(_HEADER)
    writer.element(root, "", None)
    writer.put("\n")
    return Exported("".join(writer.parts), tuple(writer.positions), tuple(writer.found))


def fragment(children: list[XNode], texts: list[str]) -> str:
    """Inline markup (an element's ``children`` and the ``texts`` around them) as the XML
    text that ``xml()`` reads back to the same elements: written as it is, inside the
    SCXML namespace."""
    writer = _Writer({}, set())
    writer.put(writer.escape(texts[0], UNKNOWN))
    for child, text in zip(children, texts[1:], strict=True):
        writer.element(child, None, SCXML_NS)
        writer.put(writer.escape(text, UNKNOWN))
    return "".join(writer.parts)


class _Writer:
    def __init__(self, origins: dict[int, Origin], verbatim: set[int]) -> None:
        self.origins = origins
        self.verbatim = verbatim
        self.parts: list[str] = []
        self.positions: list[tuple[int, int]] = []
        self.found: list[Origin] = []
        self.line = 1
        self.column = 0

    def put(self, text: str) -> None:
        self.parts.append(text)
        newlines = text.count("\n")
        if newlines:
            self.line += newlines
            self.column = len(text) - text.rfind("\n") - 1
        else:
            self.column += len(text)

    def element(self, node: XNode, indent: str | None, default: str | None) -> None:
        """Write ``node``: indented on lines of its own when ``indent`` is a string, else
        exactly as it is (inside text that is part of a value)."""
        origin = self.origins.get(id(node), UNKNOWN)
        self.positions.append((self.line, self.column + 1))
        self.found.append(origin)
        head, default = self.start_tag(node, default, origin)
        self.put(head)
        texts = node.texts
        if not node.children:
            text = texts[0]
            if not text.strip(_BLANK):
                self.put("/>")
            else:
                self.put(f">{self.escape(text, origin)}</{node.tag}>")
            return
        if indent is None or id(node) in self.verbatim or any(t.strip(_BLANK) for t in texts):
            self.put(">" + self.escape(texts[0], origin))
            for child, text in zip(node.children, texts[1:], strict=True):
                self.element(child, None, default)
                self.put(self.escape(text, origin))
            self.put(f"</{node.tag}>")
            return
        inner = indent + "  "
        self.put(">")
        for child in node.children:
            self.put("\n" + inner)
            self.element(child, inner, default)
        self.put(f"\n{indent}</{node.tag}>")

    def start_tag(self, node: XNode, default: str | None, origin: Origin) -> tuple[str, str | None]:
        """``<tag attributes`` (with the namespace declarations it needs), and the default
        namespace inside the element."""
        parts = [f"<{node.tag}"]
        if node.ns != default:
            parts.append(f" xmlns={quoteattr(node.ns or '')}")
            default = node.ns
        prefixes: dict[str, str] = {}
        for (ns, name), value in node.attrs.items():
            self.check(value, origin)
            if ns is None:
                parts.append(f" {name}={quoteattr(value)}")
                continue
            if ns == XML_NS:
                prefix = "xml"
            elif ns not in prefixes:
                prefix = prefixes[ns] = f"ns{len(prefixes)}"
                parts.append(f" xmlns:{prefix}={quoteattr(ns)}")
            else:
                prefix = prefixes[ns]
            parts.append(f" {prefix}:{name}={quoteattr(value)}")
        return "".join(parts), default

    def escape(self, text: str, origin: Origin) -> str:
        self.check(text, origin)
        return text.translate(_TEXT_ESCAPES)

    @staticmethod
    def check(text: str, origin: Origin) -> None:
        bad = _NOT_XML.search(text)
        if bad is not None:
            raise BuildError(
                origin, f"XML cannot hold the character {bad.group()!r} in {brief(text)}"
            )
