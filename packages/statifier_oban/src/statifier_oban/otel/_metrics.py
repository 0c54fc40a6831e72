"""The metrics, recorded through the OpenTelemetry metrics API when a span ends.

Every counter and histogram is derived from the facts of the span that ends (one seam,
ADR 30): a step's outcome, a timer stored, fired, cancelled or discarded, a timer's
lateness, an invocation job's duration. Their attributes are only the low-cardinality
facts (the operation, the outcome, the chart's name, the queue, the invoke type, a
discard's reason), clipped. The two gauges (executions by status, queue depth) are
observed from the last sample a :class:`~statifier_oban.otel.GaugeSampler` took.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from opentelemetry.metrics import CallbackOptions, Meter, Observation
from opentelemetry.util.types import AttributeValue
from statifier import instrumentation as seam

from ._attributes import ATTRIBUTES, value


@dataclass(frozen=True, slots=True)
class Metric:
    """One instrument, as the docs' table lists it."""

    name: str
    instrument: str
    unit: str
    attributes: tuple[str, ...]
    description: str


_STEP_OPERATIONS: Final = frozenset({seam.CREATE, seam.STEP, seam.FIRE, seam.CANCEL, seam.MIGRATE})

LATENESS_BUCKETS_S: Final = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0,
)  # fmt: skip
"""The lateness histogram's bucket boundaries (advice; a view may override them)."""

DURATION_BUCKETS_S: Final = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
)  # fmt: skip
"""The invocation duration histogram's bucket boundaries (advice)."""

_OPERATION = "statifier.operation"
_STATE = "statifier.job.state"
_OUTCOME = ATTRIBUTES["outcome"]
_CHART = ATTRIBUTES["chart"]
_QUEUE = ATTRIBUTES["queue"]
_REASON = ATTRIBUTES["reason"]
_TYPE = ATTRIBUTES["invoke_type"]
_TRIGGER = ATTRIBUTES["trigger"]
_STATUS = ATTRIBUTES["status"]

METRICS: Final = (
    Metric(
        "statifier.steps",
        "counter",
        "{step}",
        (_OPERATION, _OUTCOME, _CHART),
        "Durable execution calls that drive a chart (create, step, fire, cancel, migrate), "
        "by outcome",
    ),
    Metric(
        "statifier.macrosteps",
        "counter",
        "{macrostep}",
        (_TRIGGER, _CHART),
        "Macrosteps of live sessions, by what they processed",
    ),
    Metric(
        "statifier.timers.scheduled",
        "counter",
        "{timer}",
        (_QUEUE,),
        "Timer jobs stored (a replayed drive's existing job is not counted)",
    ),
    Metric("statifier.timers.fired", "counter", "{timer}", (_QUEUE,), "Timer jobs delivered"),
    Metric(
        "statifier.timers.cancelled",
        "counter",
        "{timer}",
        (),
        "Pending timer jobs cancelled by a <cancel>",
    ),
    Metric(
        "statifier.timers.discarded",
        "counter",
        "{timer}",
        (_QUEUE, _REASON),
        "Timer jobs run but not delivered: the execution is gone or finished, or the row "
        "was refused",
    ),
    Metric(
        "statifier.timer.lateness",
        "histogram",
        "s",
        (_QUEUE,),
        "How long after its due time a timer job started",
    ),
    Metric(
        "statifier.invoke.duration",
        "histogram",
        "s",
        (_TYPE, _OUTCOME),
        "Invocation job runs: the handler and its answer, by outcome",
    ),
    Metric(
        "statifier.executions",
        "gauge",
        "{execution}",
        (_STATUS, _CHART),
        "Durable executions by status and chart (sampled)",
    ),
    Metric(
        "statifier.queue.depth",
        "gauge",
        "{job}",
        (_QUEUE, _STATE),
        "Unfinished oban jobs by queue and state (sampled)",
    ),
)
"""Every instrument (docs/tracing.md prints this table)."""


@dataclass(frozen=True, slots=True)
class Sample:
    """The last sample of the gauges: executions by ``(status, chart)``, jobs by
    ``(queue, state)``."""

    executions: Mapping[tuple[str, str], int]
    jobs: Mapping[tuple[str, str], int]


EMPTY_SAMPLE: Final = Sample({}, {})


def _label(raw: object) -> AttributeValue:
    converted = value(raw)
    return converted if converted is not None else ""


class Metrics:
    """The instruments on one meter, and what each span's end adds to them."""

    def __init__(self, meter: Meter) -> None:
        self.sample = EMPTY_SAMPLE
        self._steps = meter.create_counter(*_text("statifier.steps"))
        self._macrosteps = meter.create_counter(*_text("statifier.macrosteps"))
        self._scheduled = meter.create_counter(*_text("statifier.timers.scheduled"))
        self._fired = meter.create_counter(*_text("statifier.timers.fired"))
        self._cancelled = meter.create_counter(*_text("statifier.timers.cancelled"))
        self._discarded = meter.create_counter(*_text("statifier.timers.discarded"))
        self._lateness = meter.create_histogram(
            *_text("statifier.timer.lateness"),
            explicit_bucket_boundaries_advisory=LATENESS_BUCKETS_S,
        )
        self._invoke = meter.create_histogram(
            *_text("statifier.invoke.duration"),
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS_S,
        )
        name, unit, description = _text("statifier.executions")
        meter.create_observable_gauge(name, [self._executions], unit, description)
        name, unit, description = _text("statifier.queue.depth")
        meter.create_observable_gauge(name, [self._jobs], unit, description)

    def ended(self, operation: str, facts: Mapping[str, Any], seconds: float) -> None:
        """Record what the span of ``operation`` that took ``seconds`` says."""
        outcome = _label(facts.get("outcome"))
        if operation in _STEP_OPERATIONS:
            labels = {_OPERATION: operation, _OUTCOME: outcome, _CHART: _label(facts.get("chart"))}
            self._steps.add(1, labels)
        elif operation == seam.MACROSTEP:
            labels = {_TRIGGER: _label(facts.get("trigger")), _CHART: _label(facts.get("chart"))}
            self._macrosteps.add(1, labels)
        elif operation in (seam.SCHEDULE_TIMER, seam.SCHEDULE_TIMERS):
            self._stored(facts)
        elif operation == seam.FIRE_TIMER:
            self._timer_ran(facts, outcome)
        elif operation == seam.CANCEL_TIMER:
            count = facts.get("cancelled")
            if isinstance(count, int) and count > 0:
                self._cancelled.add(count)
        elif operation == seam.RUN_INVOKE:
            labels = {_TYPE: _label(facts.get("invoke_type")), _OUTCOME: outcome}
            self._invoke.record(seconds, labels)

    def _stored(self, facts: Mapping[str, Any]) -> None:
        stored = facts.get("stored")
        if stored is None:  # one timer: stored unless it existed (or the insert failed)
            if "job_id" not in facts:
                return
            stored = 0 if facts.get("conflict") is True else 1
        if isinstance(stored, int) and stored > 0:
            self._scheduled.add(stored, {_QUEUE: _label(facts.get("queue"))})

    def _timer_ran(self, facts: Mapping[str, Any], outcome: AttributeValue) -> None:
        queue = {_QUEUE: _label(facts.get("queue"))}
        late = facts.get("lateness_ms")
        if isinstance(late, int):
            self._lateness.record(late / 1000, queue)
        if outcome == "completed":
            self._fired.add(1, queue)
        elif outcome in ("discarded", "cancelled"):
            self._discarded.add(1, {**queue, _REASON: _label(facts.get("reason"))})

    def _executions(self, options: CallbackOptions) -> Iterable[Observation]:
        for (status, chart), count in self.sample.executions.items():
            yield Observation(count, {_STATUS: status, _CHART: _label(chart)})

    def _jobs(self, options: CallbackOptions) -> Iterable[Observation]:
        for (queue, state), count in self.sample.jobs.items():
            yield Observation(count, {_QUEUE: _label(queue), _STATE: state})


def _text(name: str) -> tuple[str, str, str]:
    """An instrument's name, unit and description, from :data:`METRICS`."""
    metric = next(metric for metric in METRICS if metric.name == name)
    return metric.name, metric.unit, metric.description
