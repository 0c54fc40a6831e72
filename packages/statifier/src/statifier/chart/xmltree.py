"""A small, located XML tree parsed through defusedxml.

Charts may come from untrusted users: DTDs (and with them entity expansion and
external references) are refused outright, so a billion-laughs or XXE document fails
fast with a ``ChartError`` instead of expanding.
"""

from __future__ import annotations

import io
import xml.sax
import xml.sax.handler
from dataclasses import dataclass, field
from xml.parsers.expat import XMLParserType
from xml.sax.saxutils import escape, quoteattr

import defusedxml
from defusedxml.expatreader import DefusedExpatParser

from statifier.errors import ChartError, Diagnostic

SCXML_NS = "http://www.w3.org/2005/07/scxml"

MAX_DEPTH = 256
"""Deeper element nesting is refused: every later pass walks the tree recursively."""

MAX_ELEMENTS = 200_000
"""More elements are refused: compiling costs memory and time per element."""


@dataclass(slots=True)
class XNode:
    """One element: namespace, local name, attributes by (namespace, name), children."""

    ns: str | None
    tag: str
    attrs: dict[tuple[str | None, str], str]
    line: int
    column: int
    children: list[XNode] = field(default_factory=list)
    # Text runs interleaved with children: texts[i] precedes children[i]; the last run is
    # the tail after the last child.
    texts: list[str] = field(default_factory=lambda: [""])

    def attr(self, name: str) -> str | None:
        """The value of an un-namespaced attribute, or None."""
        return self.attrs.get((None, name))

    @property
    def text(self) -> str:
        """All direct character data of the element, concatenated."""
        return "".join(self.texts)

    def is_scxml(self, tag: str | None = None) -> bool:
        """Whether this element is in the SCXML namespace (and has the given local name)."""
        return self.ns == SCXML_NS and (tag is None or self.tag == tag)


class _Builder(xml.sax.handler.ContentHandler):
    """Builds the ``XNode`` tree. Elements arrive straight from expat (see
    ``_ChartParser``); character data through the SAX content-handler interface."""

    def __init__(self) -> None:
        super().__init__()
        self.root: XNode | None = None
        self.expat: XMLParserType | None = None
        self._stack: list[XNode] = []
        self._elements = 0
        self._pieces: list[str] = []
        # A chart repeats a few names: each is split once per parse (at most one entry per
        # distinct name, and names are bounded by the chart's size).
        self._names: dict[str, tuple[str | None, str]] = {}

    def start_element(self, name: str, attrs: dict[str, str]) -> None:
        parser = self.expat
        line = parser.CurrentLineNumber if parser is not None else 0
        column = parser.CurrentColumnNumber if parser is not None else 0
        stack = self._stack
        if self._pieces:
            self._flush()
        self._elements += 1
        if self._elements > MAX_ELEMENTS:
            raise ChartError(
                [
                    Diagnostic(
                        "too-large",
                        f"the chart has more than {MAX_ELEMENTS} elements",
                        line or 0,
                        (column or 0) + 1,
                    )
                ]
            )
        if len(stack) >= MAX_DEPTH:
            raise ChartError(
                [
                    Diagnostic(
                        "too-deep",
                        f"elements are nested more than {MAX_DEPTH} levels deep",
                        line or 0,
                        (column or 0) + 1,
                    )
                ]
            )
        names = self._names
        split = names.get(name)
        if split is None:
            split = names[name] = _split_name(name)
        node = XNode(
            split[0],
            split[1],
            {names.get(key) or self._split(key): value for key, value in attrs.items()},
            line or 0,
            (column or 0) + 1,
            [],
            [""],
        )
        if stack:
            parent = stack[-1]
            parent.children.append(node)
            parent.texts.append("")
        else:
            self.root = node
        stack.append(node)

    def _split(self, name: str) -> tuple[str | None, str]:
        split = self._names[name] = _split_name(name)
        return split

    def end_element(self, name: str) -> None:
        if self._pieces:
            self._flush()
        self._stack.pop()

    def characters(self, content: str) -> None:
        # A long run of text arrives in many pieces (one per 8 KiB of expat's buffer);
        # appending each to a string would copy the run every time (quadratic), so the
        # pieces are collected and joined once, when the run ends.
        if self._stack:
            self._pieces.append(content)

    def _flush(self) -> None:
        texts = self._stack[-1].texts
        pieces = self._pieces
        if len(pieces) == 1 and not texts[-1]:
            texts[-1] = pieces[0]  # the usual run: one piece (character data is buffered)
        else:
            texts[-1] = "".join((texts[-1], *pieces))
        pieces.clear()


def _split_name(name: str) -> tuple[str | None, str]:
    """(namespace, local name) of an expat name: "uri local" or "uri local prefix" (split
    as xml.sax's expat reader splits it, which ``_ChartParser`` bypasses). A name without
    a namespace has no space: XML names hold no whitespace."""
    if " " not in name:
        return (None, name)
    parts = name.split()
    return (None, name) if len(parts) == 1 else (parts[0], parts[1])


class _ChartParser(DefusedExpatParser):
    """defusedxml's expat reader (its DTD, entity and external-reference guards kept as
    they are) with the builder's element handlers bound to expat itself: xml.sax's
    per-element wrapper (name splitting into an attributes object, then a second call)
    was the largest cost of parsing a chart."""

    def __init__(self, builder: _Builder, bufsize: int) -> None:
        super().__init__(namespaceHandling=1, forbid_dtd=True, bufsize=bufsize)
        self._builder = builder

    def reset(self) -> None:
        super().reset()
        parser: XMLParserType = self._parser  # type: ignore[attr-defined]
        parser.StartElementHandler = self._builder.start_element
        parser.EndElementHandler = self._builder.end_element
        self._builder.expat = parser
        # Character data comes in one call per run (per 8 KiB of it) instead of one per
        # line: the builder joins what it gets either way.
        parser.buffer_text = True


def parse(source: bytes) -> XNode:
    """Parse chart source into an ``XNode`` tree, or raise ``ChartError``.

    The source is handed to expat in one piece (one buffer as large as the source): fed
    in chunks, expat re-scans a token that spans chunks from its start for every new
    chunk, which makes one long token (an attribute value of 50 MB) quadratic.
    """
    builder = _Builder()
    parser = _ChartParser(builder, bufsize=len(source) + 1)
    parser.setContentHandler(builder)
    parser.setFeature(xml.sax.handler.feature_namespaces, True)
    try:
        parser.parse(io.BytesIO(source))
    except defusedxml.DTDForbidden as exc:
        raise ChartError(
            [Diagnostic("forbidden-dtd", f"DTDs are not allowed in charts ({exc.name})", 1, 1)]
        ) from None
    except (defusedxml.EntitiesForbidden, defusedxml.ExternalReferenceForbidden) as exc:
        raise ChartError(
            [Diagnostic("forbidden-entity", f"entities are not allowed: {exc}")]
        ) from None
    except (LookupError, UnicodeError) as exc:
        raise ChartError(
            [Diagnostic("unknown-encoding", f"the chart's encoding cannot be read: {exc}", 1, 1)]
        ) from None
    except xml.sax.SAXParseException as exc:
        raise ChartError(
            [
                Diagnostic(
                    "malformed-xml",
                    exc.getMessage(),
                    exc.getLineNumber() or 0,
                    (exc.getColumnNumber() or 0) + 1,
                )
            ]
        ) from None
    finally:
        # expat's handlers hold the builder, and the builder held expat: a cycle.
        builder.expat = None
    if builder.root is None:
        raise ChartError([Diagnostic("malformed-xml", "empty document")])
    return builder.root


def serialize(node: XNode) -> str:
    """Markup for ``node`` and its subtree, with the namespace declarations it needs.

    Used to hand an inline child chart (``<invoke><content><scxml>...``) to a driver as
    a self-contained document.
    """
    prefixes: dict[str, str] = {}

    def qualify(ns: str | None, name: str) -> str:
        if ns is None or ns == SCXML_NS:
            return name
        if ns not in prefixes:
            prefixes[ns] = f"ns{len(prefixes)}"
        return f"{prefixes[ns]}:{name}"

    def render(element: XNode) -> str:
        tag = qualify(element.ns, element.tag)
        attrs = "".join(
            f" {qualify(ns, name)}={quoteattr(value)}"
            for (ns, name), value in element.attrs.items()
        )
        inner = [escape(element.texts[0])]
        for child, text in zip(element.children, element.texts[1:], strict=True):
            inner.append(render(child))
            inner.append(escape(text))
        body = "".join(inner)
        return f"<{tag}{attrs}>{body}</{tag}>" if body else f"<{tag}{attrs}/>"

    markup = render(node)
    head = qualify(node.ns, node.tag)
    declarations = f' xmlns="{SCXML_NS}"' + "".join(
        f' xmlns:{prefix}="{ns}"' for ns, prefix in prefixes.items()
    )
    return f"<{head}{declarations}" + markup[len(head) + 1 :]


def dedented(body: str) -> str:
    """``body`` without its surrounding blank lines and the indentation its lines share:
    how a ``<script>`` body is read, wherever the chart indents it."""
    lines = body.strip("\n").splitlines()
    indents = [len(line) - len(line.lstrip()) for line in lines if line.strip()]
    cut = min(indents, default=0)
    return "\n".join(line[cut:] for line in lines)
