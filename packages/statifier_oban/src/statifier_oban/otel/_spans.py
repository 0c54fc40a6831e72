"""``OpenTelemetry``: the ``statifier.instrumentation.Instrumentation`` on the OpenTelemetry
API (ADR 30).

A span is started as the current span (its children are the spans started inside it), named
``Verb:Name`` (``_attributes.OPERATIONS``) and given its facts as attributes. A context
carried by a job row is read as untrusted input (:func:`read_carrier`: a dict of at most
:data:`MAX_CARRIER_ENTRIES` short texts, else ignored) and extracted with the global
propagator (W3C ``traceparent``/``tracestate`` and baggage by default, ``OTEL_PROPAGATORS``
otherwise); the span of the job's run is its child, or, with ``parent="link"``, the root of
a new trace linked to it. When a span ends, its facts feed the metrics.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from typing import Any, Final, Literal

from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Status, StatusCode
from statifier import instrumentation as seam

from ._attributes import OPERATIONS, attributes, span_name
from ._metrics import Metrics

ParentMode = Literal["child", "link"]
"""How a job run's span relates to the span that stored the job (ADR 30)."""

MAX_CARRIER_ENTRIES: Final = 8
"""The most entries of a carried trace context a job row may hold."""

MAX_CARRIER_TEXT: Final = 1024
"""The most characters of a carried entry's key or value (W3C ``tracestate`` is at most
512, a ``traceparent`` 55)."""


def read_carrier(carried: object) -> dict[str, str] | None:
    """The carrier a job row holds, if it is one: a dict of at most
    ``MAX_CARRIER_ENTRIES`` text entries of at most ``MAX_CARRIER_TEXT`` characters."""
    if not isinstance(carried, Mapping) or not 0 < len(carried) <= MAX_CARRIER_ENTRIES:
        return None
    read: dict[str, str] = {}
    for key, text in carried.items():
        if not (isinstance(key, str) and isinstance(text, str)):
            return None
        if len(key) > MAX_CARRIER_TEXT or len(text) > MAX_CARRIER_TEXT:
            return None
        read[key] = text
    return read


class _Span:
    """The handle a traced path adds facts to (``statifier.instrumentation.Span``)."""

    __slots__ = ("facts", "operation", "span")

    def __init__(self, span: trace.Span, operation: str, facts: dict[str, Any]) -> None:
        self.span = span
        self.operation = operation
        self.facts = facts

    def set(self, **facts: object) -> None:
        """Add facts; the subject fact renames the span (``Step`` -> ``Step:card``)."""
        self.facts.update(facts)
        subject = OPERATIONS[self.operation].subject
        if facts.get(subject) is not None:
            self.span.update_name(span_name(self.operation, facts[subject]))
        self.span.set_attributes(attributes(facts))


class OpenTelemetry:
    """Spans through ``tracer_provider``, metrics through ``meter_provider`` (each None: the
    global one), job contexts as children (``parent="child"``) or links (``"link"``)."""

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: Any = None,
        *,
        parent: ParentMode = "child",
        version: str | None = None,
    ) -> None:
        if parent not in ("child", "link"):
            raise ValueError(f"parent must be 'child' or 'link', not {parent!r}")
        self.parent_mode: ParentMode = parent
        self.tracer = trace.get_tracer("statifier", version, tracer_provider)
        self.metrics = Metrics(metrics.get_meter("statifier", version or "", meter_provider))

    @contextlib.contextmanager
    def span(
        self,
        operation: str,
        *,
        parent: object = None,
        carried: object = None,
        **facts: Any,
    ) -> Iterator[_Span]:
        """A span of ``operation`` (see ``statifier.instrumentation.Instrumentation``)."""
        made = OPERATIONS[operation]
        context, links = self._parent(parent, carried)
        attrs = dict(made.attributes)
        attrs.update(attributes(facts))
        began = time.perf_counter()
        with self.tracer.start_as_current_span(
            span_name(operation, facts.get(made.subject)),
            context=context,
            kind=made.kind,
            attributes=attrs,
            links=links,
            # An exception's message may quote a caller's value: only its type is recorded.
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            handle = _Span(span, operation, facts)
            try:
                yield handle
            except BaseException as exc:
                handle.set(outcome="error")
                kind = f"{type(exc).__module__}.{type(exc).__qualname__}"
                span.set_attribute("error.type", kind)
                span.set_status(Status(StatusCode.ERROR, kind))
                raise
            finally:
                self.metrics.ended(operation, handle.facts, time.perf_counter() - began)

    def _parent(self, parent: object, carried: object) -> tuple[Context | None, list[Link]]:
        """The context a new span starts in, and its links."""
        if carried is not None:
            carrier = read_carrier(carried)
            if carrier is None:
                return Context(), []
            extracted = propagate.extract(carrier, context=Context())
            found = trace.get_current_span(extracted).get_span_context()
            if not found.is_valid:
                return Context(), []
            if self.parent_mode == "link":
                return Context(), [Link(found)]
            return extracted, []
        if parent is seam.NO_PARENT:
            return Context(), []
        if isinstance(parent, Context):
            return parent, []
        return None, []

    def carrier(self) -> dict[str, str] | None:
        """The current context through the global propagator (None: nothing to carry)."""
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        return carrier or None

    def capture(self) -> object:
        """The current context."""
        return otel_context.get_current()

    @contextlib.contextmanager
    def continued(self, carrier: Mapping[str, str]) -> Iterator[None]:
        """The caller's context (``traceparent``...) current inside the block; a carrier
        that is not one (too large, not text) changes nothing."""
        read = read_carrier({key: carrier[key] for key in _HEADERS if key in carrier})
        if read is None:
            yield
            return
        token = otel_context.attach(propagate.extract(read, context=Context()))
        try:
            yield
        finally:
            otel_context.detach(token)

    def ids(self) -> tuple[str, str] | None:
        """The current span's trace and span ids in hex (None when it is not recorded)."""
        found = trace.get_current_span().get_span_context()
        if not found.is_valid:
            return None
        return format(found.trace_id, "032x"), format(found.span_id, "016x")


_HEADERS: Final = ("traceparent", "tracestate", "baggage")
"""The entries of a caller's carrier that :meth:`OpenTelemetry.continued` reads (HTTP
headers hold many others)."""
