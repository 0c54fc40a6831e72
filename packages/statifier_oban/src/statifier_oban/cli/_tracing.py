"""Tracing for the ``statifier-oban`` commands (ADR 30): ``--otel``, ``--traceparent``.

``--otel`` (``$STATIFIER_OBAN_OTEL``) sets the OpenTelemetry SDK up from the ``OTEL_*``
environment variables (``statifier_oban.otel.configure``) and traces the command; it needs
``statifier-oban[otel]``, the SDK and an exporter, and says so in one line when one is
missing. ``--traceparent`` (``$TRACEPARENT``, with ``--tracestate``/``$TRACESTATE`` and
``--baggage``/``$BAGGAGE``: the names OpenTelemetry's specification gives environment
variables carrying a context to a child process) continues the caller's trace: the
command's steps are children of the caller's span, and the timers and invocations they arm
carry that trace on. Without ``--otel`` nothing is exported from the command itself (the
API alone propagates the context), so the caller's span is the parent of what the workers
record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click
from statifier import instrumentation
from statifier.cli import kit
from statifier.errors import install_hint

from .._errors import TracingUnavailable


def otel_option[F: Callable[..., Any]](what: str) -> Callable[[F], F]:
    """``--otel`` (``$STATIFIER_OBAN_OTEL``): trace and measure ``what`` (see the module
    docstring)."""
    return click.option(
        "--otel",
        is_flag=True,
        envvar="STATIFIER_OBAN_OTEL",
        show_envvar=True,
        help=f"trace and measure {what} with OpenTelemetry, exporting as the OTEL_* "
        "environment variables say (needs the SDK and an exporter, see docs/tracing.md)",
    )


def tracing_options[F: Callable[..., Any]](function: F) -> F:
    """``--otel``, ``--traceparent``, ``--tracestate`` and ``--baggage`` (see the module
    docstring)."""
    options = [
        otel_option("the command"),
        click.option(
            "--traceparent",
            default=None,
            metavar="TRACEPARENT",
            envvar="TRACEPARENT",
            show_envvar=True,
            help="continue this W3C trace context (the caller's span becomes the parent)",
        ),
        click.option(
            "--tracestate",
            default=None,
            metavar="TRACESTATE",
            envvar="TRACESTATE",
            show_envvar=True,
            help="the W3C tracestate going with --traceparent",
        ),
        click.option(
            "--baggage",
            default=None,
            metavar="BAGGAGE",
            envvar="BAGGAGE",
            show_envvar=True,
            help="the W3C baggage going with --traceparent",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def load_otel() -> Any:
    """``statifier_oban.otel``, or the one-line error naming what to install."""
    try:
        from .. import otel
    except ImportError as exc:
        if not (exc.name or "").startswith("opentelemetry"):
            raise
        raise kit.CommandError(
            f"tracing needs OpenTelemetry's API: {install_hint('statifier-oban', 'otel')}"
        ) from None
    return otel


def start_tracing() -> Any:
    """Set the SDK up from ``OTEL_*`` and instrument; the providers to shut down at the end
    with :func:`stop_tracing` (one line naming what to install when something is missing)."""
    otel = load_otel()
    try:
        providers = otel.configure()
    except TracingUnavailable as exc:
        raise kit.CommandError(exc) from None
    otel.instrument()
    return providers


def stop_tracing(providers: Any) -> None:
    """Stop tracing and flush and shut down what :func:`start_tracing` set up."""
    load_otel().uninstrument()
    providers.shutdown()


@contextmanager
def traced(
    otel: bool, traceparent: str | None, tracestate: str | None, baggage: str | None
) -> Iterator[None]:
    """Trace the block as the options say (nothing at all without either)."""
    if not otel and traceparent is None:
        yield
        return
    module = load_otel()
    providers = start_tracing() if otel else None
    if providers is None:
        module.instrument()  # the API alone: the caller's context flows into the jobs
    carrier = None
    if traceparent is not None:
        carrier = {"traceparent": traceparent}
        for name, value in (("tracestate", tracestate), ("baggage", baggage)):
            if value is not None:
                carrier[name] = value
    try:
        with instrumentation.continued(carrier):
            yield
    finally:
        if providers is not None:
            stop_tracing(providers)
        else:
            module.uninstrument()
