"""Spans printed as a tree: what the docs show and what tests compare (ADR 30).

:class:`SpanRecord` is a finished span reduced to what a tree shows (its ids, parent, links,
kind, service, start, status and attributes), read from an SDK span (:meth:`SpanRecord.of`:
the ``ReadableSpan`` an in-memory exporter holds) or from a line of JSON
(:meth:`SpanRecord.from_json`, what a process wrote for another to read). :func:`span_tree`
prints records one line per span, children indented under their parent in start order,
``name (KIND) [service]``, and ``~> name`` under a span for each of its links.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class SpanRecord:
    """One finished span (see the module docstring); ids in hex."""

    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_id: str | None
    links: tuple[str, ...] = ()
    attributes: dict[str, Any] = field(default_factory=dict)
    service: str = ""
    start: int = 0
    status: str = "UNSET"
    events: tuple[str, ...] = ()

    @classmethod
    def of(cls, span: Any) -> SpanRecord:
        """The record of an SDK ``ReadableSpan``."""
        context = span.get_span_context()
        parent = span.parent
        return cls(
            name=span.name,
            kind=span.kind.name,
            trace_id=format(context.trace_id, "032x"),
            span_id=format(context.span_id, "016x"),
            parent_id=format(parent.span_id, "016x") if parent is not None else None,
            links=tuple(format(link.context.span_id, "016x") for link in span.links),
            attributes={
                key: list(value) if isinstance(value, tuple) else value
                for key, value in (span.attributes or {}).items()
            },
            service=str(span.resource.attributes.get("service.name", "")),
            start=span.start_time or 0,
            status=span.status.status_code.name,
            events=tuple(event.name for event in span.events),
        )

    def to_json(self) -> str:
        """The record as one line of JSON."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, line: str) -> SpanRecord:
        """The record :meth:`to_json` wrote."""
        data = json.loads(line)
        data["links"] = tuple(data["links"])
        data["events"] = tuple(data["events"])
        return cls(**data)


def span_tree(spans: Sequence[SpanRecord], *, attributes: Sequence[str] = ()) -> str:
    """The spans as a tree (see the module docstring); the ``attributes`` named are shown
    after a span's name, ``key=value``, when it has them. A span whose parent is not among
    ``spans`` is a root."""
    by_id = {span.span_id: span for span in spans}
    children: dict[str | None, list[SpanRecord]] = {}
    for span in spans:
        parent = span.parent_id if span.parent_id in by_id else None
        children.setdefault(parent, []).append(span)
    lines: list[str] = []

    def walk(parent: str | None, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=lambda s: s.start):
            shown = [
                f"{key}={span.attributes[key]}" for key in attributes if key in span.attributes
            ]
            extra = "".join(f" {item}" for item in shown)
            lines.append(f"{'  ' * depth}{span.name} ({span.kind}) [{span.service}]{extra}")
            for link in span.links:
                target = by_id.get(link)
                lines.append(f"{'  ' * (depth + 1)}~> {target.name if target else link}")
            walk(span.span_id, depth + 1)

    walk(None, 0)
    return "\n".join(lines)
