"""The report a failed check of a ``ChartRun`` ends with: where the run stood.

Every value the chart controls (variables, event data, error messages) is shown through
``brief``, so a report stays a few lines long whatever the chart holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from statifier.chart.durations import format_duration
from statifier.testing._watch import error_line
from statifier.values import brief

if TYPE_CHECKING:
    from statifier.testing._run import ChartRun

EVENTS_SHOWN: Final = 8
"""The last external events a report lists."""

ERRORS_SHOWN: Final = 5
"""The last errors a report lists."""

EFFECTS_SHOWN: Final = 12
"""The effects of the last action a report names (the first ones)."""


def describe(run: ChartRun) -> str:
    """A few indented lines: time, status and configuration, datamodel, last events,
    pending timers, open invocations, errors raised and the last action's effects."""
    name = run.machine.name or "(unnamed chart)"
    lines = [
        f"  chart {name}, session {run.session_id}, at t={format_duration(run.now_ms)}",
        f"  status: {run.status}; " + _where(run),
        f"  datamodel: {brief(run.datamodel, 300)}",
    ]
    events = run.events[-EVENTS_SHOWN:]
    if events:
        lines.append("  last events (oldest first):")
        for heard in events:
            where = "" if heard.session_id == run.session_id else f"[{heard.session_id}] "
            event = heard.event
            data = f" data={brief(event.data)}" if event.data is not None else ""
            via = f" (send_id {event.sendid})" if event.sendid else ""
            lines.append(f"    t={format_duration(heard.t_ms)} {where}{event.name!r}{via}{data}")
    else:
        lines.append("  last events: none")
    timers = run.pending_timers
    if timers:
        lines.append("  pending timers:")
        lines.extend(f"    {timer.describe(run.now_ms, run.session_id)}" for timer in timers)
    else:
        lines.append("  pending timers: none")
    invocations = run.open_invocations
    if invocations:
        shown = ", ".join(f"{i.effect.invoke_id} ({i.effect.type})" for i in invocations)
        lines.append(f"  open invocations: {shown}")
    errors = run.errors[-ERRORS_SHOWN:]
    if errors:
        lines.append("  errors raised:")
        lines.extend(f"    {error_line(error, where, run.session_id)}" for where, error in errors)
    if run.steps:
        step = run.steps[-1]
        kinds = ", ".join(type(effect).__name__ for effect in step.effects[:EFFECTS_SHOWN])
        if len(step.effects) > EFFECTS_SHOWN:
            kinds += f" and {len(step.effects) - EFFECTS_SHOWN} more"
        lines.append(
            f"  last action: {step.action} at t={format_duration(step.t_ms)}; "
            f"effects: {kinds or 'none'}"
        )
    return "\n".join(lines)


def _where(run: ChartRun) -> str:
    if run.done:
        final = ", ".join(run.final_configuration) or "none (cancelled)"
        return f"final state: {final}"
    return f"active: {', '.join(run.active) or '-'}"
