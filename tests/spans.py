"""Tracing helpers of the tests of every package (statifier_oban's, statifier_web's): the
OpenTelemetry SDK's in-memory exporter and reader, a file exporter for worker processes,
and the printed span tree the tests compare.

``traced()`` installs ``statifier_oban.otel`` on providers of its own (service ``name``)
for the block. A worker process exports to a file of JSON lines (``FileExporter``, each
span written when it ends); ``read_spans`` reads it back. ``tree(spans)`` prints the spans
as the docs show them (``statifier_oban.otel.span_tree``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON
from statifier_oban import otel
from statifier_oban.otel import SpanRecord

SPANS_FILE_ENV = "STATIFIER_TEST_SPANS"
"""A worker process exports its spans to the file this environment variable names."""


def record(span: ReadableSpan) -> SpanRecord:
    """The record of an SDK span."""
    return SpanRecord.of(span)


class FileExporter(SpanExporter):
    """Appends each span as one JSON line to ``path`` (a worker process's spans)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Write the spans, flushed at once (the process may be killed any time)."""
        with open(self.path, "a", encoding="utf-8") as out:
            for span in spans:
                out.write(record(span).to_json() + "\n")
        return SpanExportResult.SUCCESS


def read_spans(path: Path) -> list[SpanRecord]:
    """The spans a ``FileExporter`` wrote (none if the file does not exist yet)."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [SpanRecord.from_json(line) for line in lines if line.strip()]


def providers(service: str, exporter: SpanExporter, *, sampled: bool = True) -> TracerProvider:
    """A tracer provider of service ``service`` exporting each span as it ends (with
    ``sampled=False``, one whose sampler records no span at all)."""
    provider = TracerProvider(
        resource=Resource.create({"service.name": service}),
        sampler=ALWAYS_ON if sampled else ALWAYS_OFF,
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


@dataclass
class Traced:
    """What ``traced()`` yields: the exporter, the metric reader, the instrumentation."""

    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    instrumentation: otel.OpenTelemetry

    def spans(self) -> list[SpanRecord]:
        """Every span finished so far."""
        return [record(span) for span in self.exporter.get_finished_spans()]

    def named(self, name: str) -> list[SpanRecord]:
        """The finished spans called ``name``."""
        return [span for span in self.spans() if span.name == name]

    def metrics(self) -> dict[tuple[str, frozenset[tuple[str, Any]]], Any]:
        """Every data point now: ``(metric, attributes) -> value`` (a histogram's count)."""
        points: dict[tuple[str, frozenset[tuple[str, Any]]], Any] = {}
        data = self.reader.get_metrics_data()
        if data is None:
            return points
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        labels = frozenset((point.attributes or {}).items())
                        # A counter's or gauge's point has a value, a histogram's a count.
                        found = getattr(point, "value", None)
                        points[(metric.name, labels)] = (
                            found if found is not None else getattr(point, "count", None)
                        )
        return points

    def metric(self, name: str, **attributes: Any) -> Any:
        """The value of ``name``'s point whose attributes include ``attributes`` (the sum
        over every such point; 0 if none)."""
        total = 0
        wanted = set(attributes.items())
        for (metric, labels), value in self.metrics().items():
            if metric == name and wanted <= set(labels):
                total += value
        return total


@contextmanager
def traced(
    service: str = "test", *, parent: otel.ParentMode = "child", sampled: bool = True
) -> Iterator[Traced]:
    """``statifier_oban.otel`` on in-memory providers for the block (``sampled=False``:
    every trace sampled out, the metrics still read)."""
    exporter = InMemorySpanExporter()
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    tracer_provider = providers(service, exporter, sampled=sampled)
    with otel.instrumented(tracer_provider, meter_provider, parent=parent) as made:
        yield Traced(exporter, reader, made)
    meter_provider.shutdown()


def tree(spans: Sequence[SpanRecord], *, attributes: Sequence[str] = ()) -> str:
    """The spans as ``statifier_oban.otel.span_tree`` prints them."""
    return otel.span_tree(spans, attributes=attributes)
