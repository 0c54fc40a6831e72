"""The report a failed check of ``DurableEnv`` ends with: where an execution stood.

Values the chart controls (variables, error messages) are shown through ``brief``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from statifier.chart.durations import format_duration
from statifier.core.algorithm import SYSTEM_VARIABLES
from statifier.core.effects import ErrorRaised
from statifier.core.state import MachineState
from statifier.testing._watch import error_line
from statifier.values import brief
from statifier_persistence import Execution

from ..executions import PendingJob

if TYPE_CHECKING:
    from ._env import StepRecord


def describe_execution(
    execution: Execution,
    state: MachineState,
    jobs: Sequence[PendingJob],
    now: datetime,
    *,
    held: Collection[str],
    steps: Sequence[StepRecord],
    errors: Sequence[ErrorRaised],
    now_ms: int,
    elapsed_ms: int,
) -> str:
    """A few indented lines: the execution, its states, datamodel, last steps, pending
    jobs (``now`` is the database's time; ``held`` the invoke ids the test holds) and
    errors raised."""
    chart = execution.chart_name or "(unnamed chart)"
    lines = [
        f"  execution {execution.id} (chart {chart}), {execution.status} after "
        f"{execution.step_count} step{'s' if execution.step_count != 1 else ''}, "
        f"at t={format_duration(now_ms)} (the clock moved {format_duration(elapsed_ms)})",
    ]
    if state.status == "done":
        final = ", ".join(state.final_configuration) or "none (cancelled)"
        lines.append(f"  final state: {final}")
    else:
        lines.append(f"  active: {', '.join(state.active_leaf_ids()) or '-'}")
    variables = {k: v for k, v in state.datamodel.items() if k not in SYSTEM_VARIABLES}
    lines.append(f"  datamodel: {brief(variables, 300)}")
    if steps:
        lines.append("  last steps (oldest first):")
        for step in steps:
            lines.append(
                f"    t={format_duration(step.at_ms)} {step.cause} -> {step.status} in "
                f"{', '.join(step.states) or '-'}"
            )
    if jobs:
        lines.append("  pending jobs:")
        lines.extend(f"    {_job_line(job, now, held)}" for job in jobs)
    else:
        lines.append("  pending jobs: none")
    if errors:
        lines.append("  errors raised:")
        lines.extend(f"    {error_line(error, execution.id, execution.id)}" for error in errors)
    return "\n".join(lines)


def _job_line(job: PendingJob, now: datetime, held: Collection[str]) -> str:
    if job.kind == "timer":
        left = max((job.scheduled_at - now) // timedelta(milliseconds=1), 0)
        return (
            f"timer {job.event!r} (send_id {job.send_id}) due in {format_duration(left)} "
            f"(job {job.job_id}, {job.state})"
        )
    state = job.state
    if job.invoke_id in held and state == "executing":
        state = "executing, held by the test"
    return f"invocation {job.invoke_id} (job {job.job_id}, {state})"
