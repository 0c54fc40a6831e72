"""OpenTelemetry traces and metrics that follow a chart across processes and days (ADR 30).

Needs the extra ``statifier-oban[otel]`` (``opentelemetry-api`` only); an application
brings its own SDK and exporter, or lets ``statifier-oban worker --otel`` set them up from
the ``OTEL_*`` environment variables (:func:`configure`). Nothing else in statifier imports
this module, and nothing is traced until :func:`instrument` is called::

    from statifier_oban import otel
    otel.instrument()  # the global tracer and meter providers

From then on every durable execution call (create, step, fire, cancel, migrate), every live
session's macrostep, and every timer and invocation job stored and run has a span named
``Verb:Name`` (``Step:card_authorization``, ``FireTimer:authorization.expired``), with the
attributes of :data:`ATTRIBUTES` and the metrics of :data:`METRICS`. A job stores the trace
context of the span that inserted it in its meta, and the span of its run (in any process,
days later) is that span's child: a timer armed in a request and fired a week later is in
the request's trace. ``instrument(parent="link")`` starts a new trace per job run instead,
linked to the one that stored it.

:func:`span_tree` prints finished spans as a tree (what tests compare, with the SDK's
in-memory exporter). :class:`GaugeSampler` feeds the two gauges (executions by status, queue depth).
``statifier.instrumentation.continued(headers)`` continues a caller's trace (an HTTP API's
``traceparent`` header). docs/tracing.md has the tables, a trace and a Prometheus recipe.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from statifier import instrumentation

from ._attributes import ATTRIBUTES, DB_SYSTEM, MAX_ITEMS, MAX_NAME, MAX_TEXT, MESSAGING_SYSTEM
from ._configure import Providers, configure
from ._gauges import DEFAULT_INTERVAL_S, GaugeSampler
from ._metrics import METRICS, Metric
from ._spans import MAX_CARRIER_ENTRIES, MAX_CARRIER_TEXT, OpenTelemetry, ParentMode
from ._tree import SpanRecord, span_tree

__all__ = [
    "ATTRIBUTES",
    "DB_SYSTEM",
    "DEFAULT_INTERVAL_S",
    "MAX_CARRIER_ENTRIES",
    "MAX_CARRIER_TEXT",
    "MAX_ITEMS",
    "MAX_NAME",
    "MAX_TEXT",
    "MESSAGING_SYSTEM",
    "METRICS",
    "GaugeSampler",
    "Metric",
    "OpenTelemetry",
    "ParentMode",
    "Providers",
    "SpanRecord",
    "configure",
    "instrument",
    "instrumented",
    "span_tree",
    "uninstrument",
]


def instrument(
    tracer_provider: Any = None, meter_provider: Any = None, *, parent: ParentMode = "child"
) -> OpenTelemetry:
    """Trace and measure statifier through these providers (None: the global ones) from
    now on, in this process; returns the instrumentation installed (it replaces any)."""
    from .. import __version__

    installed = OpenTelemetry(tracer_provider, meter_provider, parent=parent, version=__version__)
    instrumentation.install(installed)
    return installed


def uninstrument() -> None:
    """Stop tracing: the paths go back to costing one attribute read."""
    instrumentation.install(None)


@contextmanager
def instrumented(
    tracer_provider: Any = None, meter_provider: Any = None, *, parent: ParentMode = "child"
) -> Iterator[OpenTelemetry]:
    """:func:`instrument` for the duration of the block; what was installed before after."""
    from .. import __version__

    installed = OpenTelemetry(tracer_provider, meter_provider, parent=parent, version=__version__)
    with instrumentation.installed(installed):
        yield installed
