"""Enqueue elsewhere, answer later: a report built by another release, under a deadline.

Run from the repository root::

    uv run python examples/report_deadline.py [--database-url CONNINFO]

The chart (``report_deadline.scxml``) enters ``reporting``: its ``<invoke type="myapp:report">``
becomes an invocation job whose ``ReportHandler.run`` only hands the work to the reporting
release (a ``BuildReport`` job on that release's own Oban instance and queue) and answers
``Deferred()``. The job completes without delivering anything, and the chart waits. When the
reporting release has built the report, it answers the invocation itself through the host's
invoke delivery (``SessionInvokeDelivery().deliver(scope, invoke_id, data)``).

The chart's own deadline, ``<send id="report_deadline" event="report.too_slow">``, is a
durable timer (``DurableTimers``). The chart says 2h; this example sets it to 1 s. Two runs:

1. October builds in 0.1 s: ``done.invoke.report`` arrives in time, the chart reaches
   ``reported``, and leaving ``reporting`` cancels the deadline's job.
2. November takes 2 s: the deadline fires first and the chart parks in ``needs_attention``.
   The late answer still finds the session alive (the delivery says ``Delivered()``), and
   the session drops it, because leaving ``reporting`` cancelled the invocation.

Without ``--database-url`` an embedded PostgreSQL server is started in a temporary data
directory and removed at the end. The example checks its own outcome (exit status 1 if a
check fails).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import statifier
from _harness import (
    Host,
    Story,
    narrate,
    parse_args,
    run_story,
    running_host,
    running_release,
    statifier_oban_config,
    wait_for,
    wait_for_state,
)
from oban import Job, Oban
from oban.worker import register_worker, worker_name
from statifier import Machine
from statifier.core.effects import Invoke
from statifier.runtime.session import Session
from statifier_oban import (
    Config,
    Deferred,
    DeliveryAnswer,
    DurableTimers,
    InvokeHandler,
    RunContext,
    RunResult,
    SessionInvokeDelivery,
)

CHART = Path(__file__).with_name("report_deadline.scxml")

DEADLINE = "1s"
"""The chart's ``deadline`` (``2h`` as written), scaled down for the example."""

REPORTS_OBAN = "reporting-release"
"""The name of the reporting release's Oban instance."""

BUILD_SECONDS = {"2026-10": 0.1, "2026-11": 2.0}
"""How long the reporting release takes to build each month's report."""

ANSWERS: dict[str, tuple[float, DeliveryAnswer]] = {}
"""What the invoke delivery answered the reporting release, by scope (with the time)."""


class ReportHandler(InvokeHandler):
    """``myapp:report``: hand the build to the reporting release; answer later."""

    def config(self) -> Config:
        """The host's config (read when the job is stored and when it runs)."""
        return statifier_oban_config()

    async def run(self, invoke: Invoke, ctx: RunContext | None = None) -> RunResult:
        """Enqueue the build on the reporting release's queue, then ``Deferred()``.

        The other release needs the scope and the invoke id to answer with, hence the
        two-argument form. The job may run twice (at-least-once), so the build is keyed on
        ``(scope, invoke_id)`` on the other side.
        """
        assert ctx is not None  # noqa: S101 - the worker passes ctx to a two-argument run
        build = Job(
            worker_name(BuildReport),
            queue="reports",
            args={
                "scope": ctx.scope,
                "invoke_id": ctx.invoke_id,
                "period": invoke.params["period"],
            },
        )
        await Oban.get_instance(REPORTS_OBAN).enqueue(build)
        return Deferred()


class BuildReport:
    """The reporting release's worker: build the report, then answer the invocation."""

    built: ClassVar[dict[tuple[str, str], str]] = {}
    """Reports built, by ``(scope, invoke_id)``: the build's idempotency key."""

    async def process(self, job: Job) -> None:
        """Build (that takes the month's time), then deliver ``done.invoke.<id>``."""
        scope, invoke_id, period = job.args["scope"], job.args["invoke_id"], job.args["period"]
        key = (scope, invoke_id)
        if key not in self.built:
            await asyncio.sleep(BUILD_SECONDS[period])
            self.built[key] = f"rpt-{period}"
        # The host's invoke delivery, called by the release that finished the work: the
        # liveness check first, then done.invoke.report into the session. (With the default
        # SessionInvokeDelivery that takes a process where the session lives: here, this one.)
        answer = SessionInvokeDelivery().deliver(scope, invoke_id, {"report_id": self.built[key]})
        ANSWERS[scope] = (time.monotonic(), answer)


register_worker(BuildReport)


async def start_report(host: Host, machine: Machine, scope: str, period: str) -> Session:
    """Start a report execution for ``period`` with the durable deadline."""
    return await Session.start(
        machine,
        session_id=scope,
        invoke_handlers={"myapp:report": ReportHandler},
        delayed_sends=DurableTimers(host.config),
        datamodel={"period": period, "deadline": DEADLINE},
    )


async def in_time(host: Host, machine: Machine, told: Story, seen: list[Any]) -> None:
    """October: the answer beats the deadline, which is cancelled."""
    told.part("1. report-2026-10: built in 0.1 s, deadline 1 s")
    session = await start_report(host, machine, "report-2026-10", "2026-10")
    try:
        reported = await wait_for_state(session, "reported", timeout=5)
        status = session.status()
        report = session.snapshot().datamodel["report"]
        told.say(f"session is {status.status} in {status.configuration}, report = {report!r}")
        rows = await host.settled_jobs("report-2026-10")
        for row in rows:
            told.say(f"    {row}")
    finally:
        await session.stop()
    _, answer = ANSWERS.get("report-2026-10", (0.0, None))
    told.check(reported and status.status == "done", "the chart reached `reported`")
    told.check(report == {"report_id": "rpt-2026-10"}, "with the reporting release's answer")
    told.check(
        [(r.state, r.attempt) for r in rows if r.kind == "InvokeWorker"] == [("completed", 1)],
        "the invocation's job completed without answering (Deferred)",
    )
    told.check(
        [name for name, meta in seen if meta.get("scope") == "report-2026-10"].count(
            "invoke.deferred"
        )
        == 1,
        "invoke.deferred was emitted once",
    )
    told.check(
        [r.state for r in rows if r.send_id == "report_deadline"] == ["cancelled"],
        "leaving `reporting` cancelled the deadline's job",
    )
    told.check(type(answer).__name__ == "Delivered", "the delivery answered Delivered()")


async def too_slow(host: Host, machine: Machine, told: Story) -> None:
    """November: the deadline fires first; the late answer is dropped by the session."""
    told.part("2. report-2026-11: built in 2 s, deadline 1 s")
    started = time.monotonic()
    session = await start_report(host, machine, "report-2026-11", "2026-11")
    try:
        parked = await wait_for_state(session, "needs_attention", timeout=5)
        parked_after = time.monotonic() - started
        told.say(f"session is in {session.status().configuration} after {parked_after:.2f} s")
        told.say(
            "leaving `reporting` cancelled the deadline (count 0: its job had just fired) and "
            "the invocation (its job had completed; stopping the build is the host's to arrange)"
        )
        answered = await wait_for(lambda: "report-2026-11" in ANSWERS, timeout=5)
        answered_at, answer = ANSWERS.get("report-2026-11", (0.0, None))
        told.say(f"the late answer came {answered_at - started:.2f} s in: delivery said {answer}")
        # Let the session take the answer off its inbox before looking.
        await wait_for(lambda: session.status().queued_events == 0)
        await asyncio.sleep(0.1)
        status = session.status()
        datamodel = session.snapshot().datamodel
        told.say(
            f"session is {status.status} in {status.configuration}, report = "
            f"{datamodel['report']!r}, answers heard late = {datamodel['answers_heard_late']}"
        )
        rows = await host.settled_jobs("report-2026-11")
        for row in rows:
            told.say(f"    {row}")
    finally:
        await session.stop()
    told.check(parked and parked_after >= 0.9, "the 1 s deadline fired and parked the chart")
    told.check(
        [r.state for r in rows if r.send_id == "report_deadline"] == ["completed"],
        "the deadline's job fired (completed)",
    )
    told.check(answered and type(answer).__name__ == "Delivered", "the late answer was delivered")
    told.check(
        status.status == "running" and "needs_attention" in status.configuration,
        "the chart stays in needs_attention",
    )
    told.check(
        datamodel["report"] is None and datamodel["answers_heard_late"] == 0,
        "the session dropped the late answer: the chart never heard it",
    )


async def story(told: Story, database_url: str | None) -> None:
    """Both reports against one host plus the reporting release's own Oban instance."""
    machine = statifier.compile(CHART.read_text())
    ANSWERS.clear()
    BuildReport.built.clear()
    async with (
        running_host(database_url, "report-host", told) as host,
        running_release(host.url, "reports", REPORTS_OBAN),
    ):
        with narrate(told, *NARRATED) as seen:
            await in_time(host, machine, told, seen)
            await too_slow(host, machine, told)


NARRATED = (
    "timer.scheduled",
    "timer.cancelled",
    "timer.fired",
    "invoke.enqueued",
    "invoke.deferred",
)
"""The telemetry events the story tells as they happen."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the example; the exit status (0: every check held)."""
    args = parse_args((__doc__ or "").split("\n\n")[0], argv)
    return run_story(
        lambda told: story(told, args.database_url),
        "report_deadline: deferred invocations answered by another release, with a deadline",
    )


if __name__ == "__main__":
    # Import this file as the module `report_deadline`, so that the job rows name its
    # handler and worker by an import path any worker process can resolve (not __main__).
    import report_deadline

    sys.exit(report_deadline.main())
