"""Capturing a card authorization off the session, as an Oban job (and a capture that fails).

Run from the repository root::

    uv run python examples/capture.py [--database-url CONNINFO]

The chart (``capture.scxml``) holds an authorization for seven days with a durable timer;
``capture.requested`` takes the timer down and enters ``capturing``, whose
``<invoke type="myapp:capture">`` becomes one invocation job. ``CaptureHandler.run`` calls
the payment processor, keyed on the invocation, and answers ``Ok({"capture_id": ...})``:
the session hears ``done.invoke.capture`` and settles.

The second run registers ``CaptureOnceHandler`` (``max_attempts = 1``) for a processor that
has revoked the authorization: its one attempt answers ``Error("authorization_revoked")``,
the job is discarded, and the session hears ``error.communication.invoke.capture`` with
``{"reason": "run_failed", "attempts": 1, ...}`` and parks in ``needs_attention``.

Without ``--database-url`` an embedded PostgreSQL server is started in a temporary data
directory and removed at the end. The example checks its own outcome (exit status 1 if a
check fails).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import statifier
from _harness import (
    Host,
    Story,
    narrate,
    parse_args,
    run_story,
    running_host,
    statifier_oban_config,
    wait_for_state,
)
from statifier import Machine
from statifier.core.effects import Invoke
from statifier.runtime.session import Session
from statifier_oban import (
    Config,
    DurableTimers,
    Error,
    InvokeHandler,
    Ok,
    RunContext,
    RunResult,
)

CHART = Path(__file__).with_name("capture.scxml")


class Payments:
    """A stand-in payment processor: a capture is made once per idempotency key."""

    def __init__(self) -> None:
        self.captures: dict[str, str] = {}
        self.revoked: set[str] = set()
        self.calls: dict[str, int] = {}

    def reset(self) -> None:
        """Forget every capture, revocation and call."""
        self.captures.clear()
        self.revoked.clear()
        self.calls.clear()

    def capture(self, key: str, authorization_id: str) -> str | None:
        """The capture id for ``key`` (made on the first call), or None if revoked."""
        self.calls[key] = self.calls.get(key, 0) + 1
        if authorization_id in self.revoked:
            return None
        return self.captures.setdefault(key, f"cap_{len(self.captures) + 1:04d}")


PAYMENTS = Payments()


class CaptureHandler(InvokeHandler):
    """``myapp:capture``: capture the authorization named in the params."""

    def config(self) -> Config:
        """The host's config (read when the job is stored and when it runs)."""
        return statifier_oban_config()

    async def run(self, invoke: Invoke, ctx: RunContext) -> RunResult:
        """Capture once per invocation; the job is at-least-once, so the call is keyed."""
        # The invoke id is the author's ("capture"): stable across replays, unique within
        # the execution. With the scope it names this capture everywhere.
        key = f"{ctx.scope}/{invoke.invoke_id}"
        capture_id = PAYMENTS.capture(key, invoke.params["authorization_id"])
        if capture_id is None:
            return Error("authorization_revoked")
        return Ok({"capture_id": capture_id})


class CaptureOnceHandler(CaptureHandler):
    """The same capture, attempted once: a revoked authorization does not come back."""

    max_attempts = 1


async def settle(host: Host, machine: Machine, told: Story) -> None:
    """card-1: the hold is armed, the capture runs as a job, the answer settles the chart."""
    told.part("1. card-1: the processor captures")
    session = await Session.start(
        machine,
        session_id="card-1",
        invoke_handlers={"myapp:capture": CaptureHandler},
        delayed_sends=DurableTimers(host.config),
        datamodel={"authorization_id": "auth_1001"},
    )
    try:
        told.say("session card-1 is `authorized`; its 7-day hold is a job row:")
        for row in await host.jobs("card-1"):
            told.say(f"    {row}")
        told.say("-> capture.requested")
        session.send_event("capture.requested")
        settled = await wait_for_state(session, "settled")
        status = session.status()
        capture_id = session.snapshot().datamodel["capture_id"]
        told.say(f"session card-1 is {status.status} in {status.configuration}")
        told.say(f"capture_id = {capture_id!r}")
        rows = await host.settled_jobs("card-1")
        for row in rows:
            told.say(f"    {row}")
    finally:
        await session.stop()
    told.check(settled and status.status == "done", "card-1 settled (final state, session done)")
    told.check(
        capture_id is not None and capture_id == PAYMENTS.captures.get("card-1/capture"),
        "the capture id is the processor's",
    )
    told.check(PAYMENTS.calls.get("card-1/capture") == 1, "the processor was called once")
    told.check(
        [r.state for r in rows if r.kind == "TimerWorker"] == ["cancelled"],
        "leaving `authorized` cancelled the 7-day hold",
    )
    told.check(
        [(r.state, r.attempt) for r in rows if r.kind == "InvokeWorker"] == [("completed", 1)],
        "one invocation job, completed on its first attempt",
    )


async def park(host: Host, machine: Machine, told: Story) -> None:
    """card-2: the processor refuses for good; one attempt, then the chart hears it."""
    told.part("2. card-2: the authorization was revoked (CaptureOnceHandler, max_attempts = 1)")
    PAYMENTS.revoked.add("auth_2002")
    session = await Session.start(
        machine,
        session_id="card-2",
        invoke_handlers={"myapp:capture": CaptureOnceHandler},
        delayed_sends=DurableTimers(host.config),
        datamodel={"authorization_id": "auth_2002"},
    )
    try:
        told.say("-> capture.requested")
        session.send_event("capture.requested")
        parked = await wait_for_state(session, "needs_attention")
        status = session.status()
        failure = session.snapshot().datamodel["failure"]
        told.say(f"session card-2 is {status.status} in {status.configuration}")
        told.say(f"error.communication.invoke.capture data = {failure!r}")
        rows = await host.settled_jobs("card-2")
        for row in rows:
            told.say(f"    {row}")
    finally:
        await session.stop()
    told.check(
        parked and status.status == "running", "card-2 parked in needs_attention, still alive"
    )
    told.check(
        failure == {"reason": "run_failed", "attempts": 1, "detail": "'authorization_revoked'"},
        "the failure says run_failed after 1 attempt",
    )
    told.check(
        [(r.state, r.attempt, r.max_attempts) for r in rows if r.kind == "InvokeWorker"]
        == [("discarded", 1, 1)],
        "the job was attempted once and discarded: no retry",
    )
    told.check(PAYMENTS.calls.get("card-2/capture") == 1, "the processor was asked once")


async def story(told: Story, database_url: str | None) -> None:
    """Both captures against one host (one Oban running the invokes and timers queues)."""
    machine = statifier.compile(CHART.read_text())
    PAYMENTS.reset()
    async with running_host(database_url, "capture", told) as host:
        with narrate(told, *NARRATED):
            await settle(host, machine, told)
            await park(host, machine, told)


NARRATED = (
    "timer.scheduled",
    "timer.cancelled",
    "invoke.enqueued",
    "invoke.delivered",
    "invoke.failed",
)
"""The telemetry events the story tells as they happen."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the example; the exit status (0: every check held)."""
    args = parse_args((__doc__ or "").split("\n\n")[0], argv)
    return run_story(
        lambda told: story(told, args.database_url),
        "capture: a card authorization captured by an Oban job",
    )


if __name__ == "__main__":
    # Import this file as the module `capture`, so that the job rows name its handlers
    # `capture:CaptureHandler`, an import path any worker process can resolve, rather
    # than `__main__:CaptureHandler`.
    import capture

    sys.exit(capture.main())
