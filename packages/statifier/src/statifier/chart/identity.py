"""Chart identity: what a chart *is*, independent of how its source is formatted.

A chart's identity is ``scxml-c1:sha256:<hex>`` (plus ``;name=...;version=...`` when
they were given at compile time): the SHA-256 of the chart's **canonical form**, a text
that keeps everything the compiler reads and nothing else. ``scxml-c1`` names the rules
below; a later rule gets a new name, so identities of one rule never meet another's.

Canonical form, rule ``scxml-c1``: one line per item, depth shown by indentation,
every name and value a JSON string (so no value can break a line)::

    element "<namespace>" "<local name>"
      attribute null "<name>" "<value>"     un-namespaced attributes first, then by
                                            (namespace, name)
      script "<body>"                       <script> text, dedented as it is compiled
      value <json>                          inline <data>/<assign>/<content> text: the
                                            value the datamodel reads from it
      text "<run>"                          any other text run that is not all whitespace
    end

What does not change the identity: comments and processing instructions, the XML
declaration and encoding, whitespace-only text between elements (inside inline markup
too), attribute order, quoting and entity or CDATA spelling, line endings (XML folds
CRLF to LF), namespace prefixes (names are compared by namespace URI), a uniform
re-indentation of a script body, and whitespace the datamodel ignores in inline data
(``{"a": 1}`` reformatted). Everything else does: states, transitions, attributes and
their values (expressions verbatim), executable content, and significant text.

Before rule ``scxml-c1`` the identity was ``sha256:<hex>`` of the source bytes;
:func:`source_identity` still computes it (every ``Machine`` carries it as
``source_identity``) so positions and registry rows written under it keep loading
(ADR 0004, ADR 16).
"""

from __future__ import annotations

import hashlib
import json
from json.encoder import encode_basestring_ascii
from typing import Final

from statifier import datamodel as dm
from statifier.chart.xmltree import SCXML_NS, XNode, dedented, parse
from statifier.errors import ChartError, Diagnostic

IDENTITY_FORMAT: Final = "scxml-c1"
"""The name of the canonical-form rule; the first part of every identity."""

LEGACY_PREFIX: Final = "sha256:"
"""How an identity over the source bytes (before canonical identities) starts."""

_INLINE_VALUE_TAGS: Final = frozenset({"data", "assign", "content"})
_XML_WHITESPACE: Final = " \t\r\n"


def identity_suffix(name: str | None, version: str | None) -> str:
    """``;name=...;version=...`` for the compile-time name and version that are given."""
    suffix = ""
    if name is not None:
        suffix += f";name={name}"
    if version is not None:
        suffix += f";version={version}"
    return suffix


def source_identity(source: bytes, name: str | None = None, version: str | None = None) -> str:
    """The identity before canonical forms: ``sha256:`` of the source bytes, plus suffix."""
    return LEGACY_PREFIX + hashlib.sha256(source).hexdigest() + identity_suffix(name, version)


def chart_identity(source: str | bytes, name: str | None = None, version: str | None = None) -> str:
    """The identity of a chart's source: ``scxml-c1:sha256:`` of its canonical form.

    Parses the source (``ChartError`` if it is not well-formed, or names a datamodel that
    is unknown or not installed) but does not compile it; for a chart that compiles, this
    is its ``Machine.identity``.
    """
    raw = source.encode("utf-8") if isinstance(source, str) else bytes(source)
    root = parse(raw)
    return identity_of(canonical_form(root, _datamodel(root)), name, version)


def identity_of(canonical: str, name: str | None, version: str | None) -> str:
    """The identity of a canonical form (see :func:`canonical_form`)."""
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    return f"{IDENTITY_FORMAT}:sha256:{digest}" + identity_suffix(name, version)


def canonical_text(source: str | bytes) -> str:
    """The canonical form of a chart's source, the text its identity hashes.

    For people: diff the canonical forms of two revisions to see why their identities
    differ.
    """
    raw = source.encode("utf-8") if isinstance(source, str) else bytes(source)
    root = parse(raw)
    return canonical_form(root, _datamodel(root))


def canonical_form(root: XNode, datamodel: dm.Datamodel) -> str:
    """The canonical form (rule ``scxml-c1``, see the module docstring) of a parsed chart.

    ``datamodel`` reads inline values, as the compiler does for this chart.
    """
    lines: list[str] = []
    _Writer(datamodel, lines).element(root, "")
    return "\n".join(lines) + "\n"


def _datamodel(root: XNode) -> dm.Datamodel:
    name = root.attr("datamodel") or dm.DEFAULT_DATAMODEL
    try:
        return dm.datamodel_for(name)
    except KeyError:
        message = f"datamodel {name!r} is not supported"
        code = "unsupported-datamodel"
    except dm.DatamodelUnavailable as exc:
        message, code = str(exc), "datamodel-unavailable"
    raise ChartError([Diagnostic(code, message, root.line, root.column)])


def _quote(text: str | None) -> str:
    """``text`` as a JSON string literal in ASCII (``null`` for None)."""
    return "null" if text is None else encode_basestring_ascii(text)


def _attribute_order(item: tuple[tuple[str | None, str], str]) -> tuple[str, str]:
    (ns, name), _ = item
    return (ns or "", name)


def _in_order(attrs: dict[tuple[str | None, str], str]) -> list[tuple[tuple[str | None, str], str]]:
    """Attributes by (namespace, name), un-namespaced ones (namespace None) first."""
    try:
        # Keys are unique, so values are never compared. Where every namespace is None
        # (or every one a URI, never empty) this is the order below, without a key call
        # per item; a mix of None and URIs cannot be compared and takes the keyed sort.
        return sorted(attrs.items())
    except TypeError:
        return sorted(attrs.items(), key=_attribute_order)


class _Writer:
    """Writes the lines of one canonical form.

    A chart repeats a few element and attribute names many times: each one's quoted
    line head is built once per chart (the memos live as long as this writer).
    """

    __slots__ = ("_attribute_heads", "_datamodel", "_element_heads", "_lines")

    def __init__(self, datamodel: dm.Datamodel, lines: list[str]) -> None:
        self._datamodel = datamodel
        self._lines = lines
        self._element_heads: dict[tuple[str | None, str], str] = {}
        self._attribute_heads: dict[tuple[str | None, str], str] = {}

    def element(self, node: XNode, pad: str) -> None:
        lines = self._lines
        ns, tag = node.ns, node.tag
        head = self._element_heads.get((ns, tag))
        if head is None:
            head = f"element {_quote(ns or '')} {_quote(tag)}"
            self._element_heads[(ns, tag)] = head
        lines.append(pad + head)
        inner = pad + "  "
        attrs = node.attrs
        if attrs:
            heads = self._attribute_heads
            items = attrs.items() if len(attrs) == 1 else _in_order(attrs)
            for key, value in items:
                attribute = heads.get(key)
                if attribute is None:
                    attribute = f"attribute {_quote(key[0])} {_quote(key[1])} "
                    heads[key] = attribute
                lines.append(inner + attribute + encode_basestring_ascii(value))
        texts = node.texts
        if ns == SCXML_NS and tag == "script":
            text = texts[0] if len(texts) == 1 else "".join(texts)
            if text.strip():
                lines.append(f"{inner}script {_quote(dedented(text))}")
        elif ns == SCXML_NS and tag in _INLINE_VALUE_TAGS and not node.children:
            text = texts[0]
            if text.strip():
                lines.append(f"{inner}value {_inline_value(text, self._datamodel)}")
        else:
            run = texts[0]
            if run and run.strip(_XML_WHITESPACE):
                lines.append(f"{inner}text {_quote(run)}")
            for position, child in enumerate(node.children, 1):
                self.element(child, inner)
                run = texts[position]
                if run and run.strip(_XML_WHITESPACE):
                    lines.append(f"{inner}text {_quote(run)}")
        lines.append(pad + "end")


def _inline_value(text: str, datamodel: dm.Datamodel) -> str:
    """The value the datamodel reads from inline text, as compact JSON (key order kept:
    it is observable); text whose value JSON cannot write is kept as it is."""
    value = datamodel.parse_inline_content(text)
    try:
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return "text " + _quote(text)
