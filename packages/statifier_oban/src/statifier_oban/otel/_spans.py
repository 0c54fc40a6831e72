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
import logging
import time
from collections.abc import Iterator, Mapping
from types import TracebackType
from typing import Any, Final, Literal

from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Status, StatusCode
from statifier import instrumentation as seam

from ._attributes import OPERATIONS, attributes, span_name
from ._metrics import Metrics

logger = logging.getLogger("statifier_oban.otel")

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


_UNSET: Final = object()

_NO_LINKS: Final[list[Link]] = []
"""The links of a span with none (never changed: the SDK copies what it is given)."""


class _Span:
    """One span: the context manager :meth:`OpenTelemetry.span` returns, and the handle a
    traced path adds facts to (``statifier.instrumentation.Span``).

    A plain class rather than generator-based context managers: entering and leaving it
    are on every traced step, and each generator layer costs a few microseconds there.
    """

    __slots__ = ("began", "facts", "operation", "owner", "span", "token")

    def __init__(
        self, owner: OpenTelemetry, operation: str, facts: dict[str, Any], span: trace.Span
    ) -> None:
        self.owner = owner
        self.operation = operation
        self.facts = facts
        self.span = span
        self.token: object = None
        self.began = 0.0

    def set(self, **facts: object) -> None:
        """Add facts; the subject fact renames the span (``Step`` -> ``Step:card``). A fact
        the span has already, with the same value, is not set again (the SDK checks every
        attribute it is given, on every traced step)."""
        known = self.facts
        new = {fact: value for fact, value in facts.items() if known.get(fact, _UNSET) != value}
        if not new:
            return
        known.update(new)  # the metrics read them whether the span records or not
        if not self.span.is_recording():
            return
        subject = OPERATIONS[self.operation].subject
        if new.get(subject) is not None:
            self.span.update_name(span_name(self.operation, new[subject]))
        self.span.set_attributes(attributes(new))

    def recording(self) -> bool:
        """Whether the OpenTelemetry span records (a sampled-out or API-only one does not)."""
        return self.span.is_recording()

    def __enter__(self) -> _Span:
        self.token = otel_context.attach(trace.set_span_in_context(self.span))
        self.began = time.perf_counter()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if kind is not None:
                self.set(outcome="error")
                # An exception's message may quote a caller's value: only its type is kept.
                name = f"{kind.__module__}.{kind.__qualname__}"
                self.span.set_attribute("error.type", name)
                self.span.set_status(Status(StatusCode.ERROR, name))
            self.owner.metrics.ended(self.operation, self.facts, time.perf_counter() - self.began)
        except Exception:  # telemetry must never break the traced step
            logger.exception("recording the metrics of %s failed", self.operation)
        finally:
            otel_context.detach(self.token)  # type: ignore[arg-type]
            self.span.end()


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

    def span(
        self,
        operation: str,
        *,
        parent: object = None,
        carried: object = None,
        **facts: Any,
    ) -> _Span:
        """A span of ``operation`` (see ``statifier.instrumentation.Instrumentation``),
        started now, current inside the ``with`` block, ended when it is left."""
        made = OPERATIONS[operation]
        if parent is None and carried is None:
            context, links = None, _NO_LINKS
        else:
            context, links = self._parent(parent, carried)
        started = self.tracer.start_span(
            span_name(operation, facts.get(made.subject)),
            context=context,
            kind=made.kind,
            links=links,
        )
        if started.is_recording():  # nothing to convert for a span that is not kept
            attrs = attributes(facts)
            attrs.update(made.attributes)
            started.set_attributes(attrs)
        return _Span(self, operation, facts, started)

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
