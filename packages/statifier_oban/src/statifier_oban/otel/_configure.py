"""The OpenTelemetry SDK set up from the standard ``OTEL_*`` environment variables.

What ``statifier-oban worker --otel`` (and every command's ``--otel``) runs. The SDK reads
most variables itself (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``,
``OTEL_TRACES_SAMPLER``, ``OTEL_EXPORTER_OTLP_*``, ``OTEL_METRIC_EXPORT_INTERVAL``...);
this module picks the exporters ``OTEL_TRACES_EXPORTER`` and ``OTEL_METRICS_EXPORTER``
name (comma-separated, ``otlp`` by default, ``none`` for none) through the entry points
exporter packages register, as OpenTelemetry's own auto-configuration does. A process
whose global providers are already the SDK's (``opentelemetry-instrument``, or the
application's own set-up) keeps them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Final

from statifier.errors import install_hint

from .._errors import TracingUnavailable

SDK_PACKAGES: Final = "opentelemetry-sdk opentelemetry-exporter-otlp"
"""What a process that exports needs besides ``statifier-oban[otel]``."""

DEFAULT_SERVICE_NAME: Final = "statifier-oban"
"""``service.name`` when neither ``OTEL_SERVICE_NAME`` nor ``OTEL_RESOURCE_ATTRIBUTES``
names one."""

_EXPORTER_PACKAGES: Final = {
    "otlp": "opentelemetry-exporter-otlp",
    "otlp_proto_http": "opentelemetry-exporter-otlp-proto-http",
    "otlp_proto_grpc": "opentelemetry-exporter-otlp-proto-grpc",
    "prometheus": "opentelemetry-exporter-prometheus",
    "zipkin": "opentelemetry-exporter-zipkin",
}
"""The package that registers each usual exporter name (for the error naming it)."""


def missing_sdk() -> TracingUnavailable:
    """The error of a process asked to export without the SDK installed."""
    return TracingUnavailable(
        f"--otel exports spans and metrics through the OpenTelemetry SDK and an exporter: "
        f"{install_hint('statifier-oban', 'otel')} {SDK_PACKAGES}"
    )


@dataclass
class Providers:
    """The SDK providers a process set up (or found set up), flushed by :meth:`shutdown`."""

    tracer_provider: Any
    meter_provider: Any
    owned: bool
    """Whether this module made them (then :meth:`shutdown` shuts them down)."""

    def shutdown(self) -> None:
        """Export what is buffered and stop the exporters (only providers made here)."""
        if not self.owned:
            return
        self.tracer_provider.force_flush()
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


def configure() -> Providers:
    """Set the global tracer and meter providers up from the environment (see the module
    docstring); ``TracingUnavailable`` naming what to install when the SDK or a named
    exporter is missing."""
    try:
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:
        raise missing_sdk() from None
    current_tracer = trace.get_tracer_provider()
    current_meter = metrics.get_meter_provider()
    if isinstance(current_tracer, TracerProvider) and isinstance(current_meter, MeterProvider):
        return Providers(current_tracer, current_meter, owned=False)
    span_exporters = _exporters("OTEL_TRACES_EXPORTER", "opentelemetry_traces_exporter")
    metric_exporters = _exporters("OTEL_METRICS_EXPORTER", "opentelemetry_metrics_exporter")
    resource = Resource.create(_default_resource())
    tracer_provider = TracerProvider(resource=resource)
    for exporter in span_exporters:
        tracer_provider.add_span_processor(_batch(exporter()))
    meter_provider = MeterProvider(
        resource=resource, metric_readers=[_reader(exporter) for exporter in metric_exporters]
    )
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    return Providers(tracer_provider, meter_provider, owned=True)


def _default_resource() -> dict[str, str]:
    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    return {} if named else {"service.name": DEFAULT_SERVICE_NAME}


def _exporters(variable: str, group: str) -> list[Any]:
    """The exporter classes the variable names (``otlp`` when unset; ``none``: none)."""
    names = [name.strip() for name in os.environ.get(variable, "otlp").split(",") if name.strip()]
    found: list[Any] = []
    for name in names:
        if name == "none":
            continue
        points = metadata.entry_points(group=group, name=name)
        if not points:
            package = _EXPORTER_PACKAGES.get(name, f"the package registering {name!r}")
            raise TracingUnavailable(
                f"{variable}={name}: no such exporter is installed: pip install {package}"
            )
        found.append(next(iter(points)).load())
    return found


def _batch(exporter: Any) -> Any:
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    return BatchSpanProcessor(exporter)


def _reader(exporter_class: Any) -> Any:
    """A pull exporter (Prometheus) is a reader itself; a push one is read periodically
    (``OTEL_METRIC_EXPORT_INTERVAL``, read by the SDK)."""
    from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader

    if isinstance(exporter_class, type) and issubclass(exporter_class, MetricReader):
        return exporter_class()
    return PeriodicExportingMetricReader(exporter_class())
