"""Capping a handler's attempts: an overdue notice is mailed at most once.

Run from the repository root::

    uv run python examples/overdue_notice.py [--database-url CONNINFO]

The chart (``overdue_notice.scxml``) mails an overdue notice from ``overdue`` through
``<invoke type="library:overdue_notice">``. The mailer cannot be keyed on the invocation,
so a repeated attempt would mail the patron twice: ``OverdueNoticeHandler`` declares
``max_attempts = 1``. Today the mail server answers the first attempt with a temporary
failure (it would accept a second one): the job is attempted exactly once, discarded, and
the chart hears ``error.communication.invoke.notice`` with ``"attempts": 1`` and parks the
loan in ``notice_failed``. No retry is ever made.

For contrast, ``UncappedNoticeHandler`` is the same handler without the cap: the same
failure leaves its job ``retryable`` (oban's default of 20 attempts), the chart waits in
``overdue``, and only cancelling the session (leaving ``overdue``) takes the pending retry
down.

Without ``--database-url`` an embedded PostgreSQL server is started in a temporary data
directory and removed at the end. The example checks its own outcome (exit status 1 if a
check fails).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

import statifier
from _harness import (
    Host,
    JobRow,
    Story,
    narrate,
    parse_args,
    run_story,
    running_host,
    statifier_oban_config,
    wait_for,
    wait_for_state,
)
from statifier import Machine
from statifier.core.effects import Invoke
from statifier.runtime.session import Session
from statifier_oban import Config, Error, InvokeHandler, Ok, RunContext, RunResult

CHART = Path(__file__).with_name("overdue_notice.scxml")


class Mailer:
    """A stand-in mail server that turns away the first message for each loan."""

    def __init__(self) -> None:
        self.attempts: dict[str, int] = {}

    def send_overdue_notice(self, loan_id: str) -> str | None:
        """The message id, or None when the server turned the message away."""
        self.attempts[loan_id] = self.attempts.get(loan_id, 0) + 1
        if self.attempts[loan_id] == 1:
            return None
        return f"msg-{loan_id}-{self.attempts[loan_id]}"


MAILER = Mailer()


def send_overdue_notice(invoke: Invoke) -> RunResult:
    """Mail the notice for the loan in the params; a refusal is an ``Error``."""
    message_id = MAILER.send_overdue_notice(invoke.params["loan_id"])
    if message_id is None:
        return Error("421 4.3.2 service not available, try again later")
    return Ok({"message_id": message_id})


class OverdueNoticeHandler(InvokeHandler):
    """``library:overdue_notice``: mail the patron; never twice, so one attempt only."""

    max_attempts = 1

    def config(self) -> Config:
        """The host's config (read when the job is stored and when it runs)."""
        return statifier_oban_config()

    async def run(self, invoke: Invoke, ctx: RunContext | None = None) -> RunResult:
        """Send the notice; a refusal fails the attempt (and, capped at 1, the invocation)."""
        return send_overdue_notice(invoke)


class UncappedNoticeHandler(InvokeHandler):
    """The same notice without a cap: oban's default of 20 attempts (the contrast)."""

    def config(self) -> Config:
        """The host's config."""
        return statifier_oban_config()

    async def run(self, invoke: Invoke, ctx: RunContext | None = None) -> RunResult:
        """Send the notice; a refusal fails the attempt, which is retried later."""
        return send_overdue_notice(invoke)


async def open_loan(host: Host, machine: Machine, loan_id: str, handler: type) -> Session:
    """A loan that has just gone overdue (its notice invocation starts at once)."""
    session = await Session.start(
        machine,
        session_id=loan_id,
        invoke_handlers={"library:overdue_notice": handler},
        datamodel={"loan_id": loan_id},
    )
    session.send_event("loan.overdue")
    return session


def notice_rows(rows: list[JobRow]) -> list[tuple[str, int, int]]:
    """``(state, attempt, max_attempts)`` of each invocation job."""
    return [(r.state, r.attempt, r.max_attempts) for r in rows if r.kind == "InvokeWorker"]


async def capped(host: Host, machine: Machine, told: Story) -> None:
    """loan-1: one attempt, then the chart hears the failure."""
    told.part("1. loan-1: OverdueNoticeHandler (max_attempts = 1); the mail server says 421")
    session = await open_loan(host, machine, "loan-1", OverdueNoticeHandler)
    try:
        parked = await wait_for_state(session, "notice_failed")
        failure = session.snapshot().datamodel["failure"]
        told.say(f"loan-1 is in {session.status().configuration}")
        told.say(f"error.communication.invoke.notice data = {failure!r}")
        await asyncio.sleep(0.5)  # room for a retry, if one were coming
        rows = await host.settled_jobs("loan-1")
        for row in rows:
            told.say(f"    {row}")
    finally:
        await session.stop()
    told.check(parked, "the loan parked in notice_failed")
    told.check(
        isinstance(failure, dict)
        and failure.get("reason") == "run_failed"
        and failure.get("attempts") == 1
        and "421" in str(failure.get("detail")),
        'the failure says run_failed with "attempts": 1',
    )
    told.check(notice_rows(rows) == [("discarded", 1, 1)], "the job ran once and was discarded")
    told.check(MAILER.attempts.get("loan-1") == 1, "the patron's mail was attempted once")


async def uncapped(host: Host, machine: Machine, told: Story) -> None:
    """loan-2: the same failure without the cap waits for a retry; cancelling ends it."""
    told.part("2. for contrast, loan-2: UncappedNoticeHandler (oban's default of 20 attempts)")
    session = await open_loan(host, machine, "loan-2", UncappedNoticeHandler)
    try:

        async def retry_pending() -> bool:
            return notice_rows(await host.jobs("loan-2"))[:1] == [("retryable", 1, 20)]

        waiting = await wait_for(retry_pending)
        configuration = session.status().configuration
        told.say(f"loan-2 is still in {configuration}; its job waits for a retry:")
        for row in await host.jobs("loan-2"):
            told.say(f"    {row}")
        told.say("-> the loan is cancelled (the patron returned the book)")
        await session.cancel_and_wait()
        rows = await host.settled_jobs("loan-2")
        for row in rows:
            told.say(f"    {row}")
    finally:
        await session.stop()
    told.check(waiting and configuration == ("overdue",), "without a cap the job waits to retry")
    told.check(
        notice_rows(rows) == [("cancelled", 1, 20)],
        "leaving `overdue` cancelled the pending retry",
    )
    told.check(MAILER.attempts.get("loan-2") == 1, "so the mail was attempted once there too")


async def story(told: Story, database_url: str | None) -> None:
    """Both loans against one host (one Oban running the invokes queue)."""
    machine = statifier.compile(CHART.read_text())
    MAILER.attempts.clear()
    async with running_host(database_url, "library", told) as host:
        with narrate(told, "invoke.enqueued", "invoke.failed", "invoke.cancelled"):
            await capped(host, machine, told)
            await uncapped(host, machine, told)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the example; the exit status (0: every check held)."""
    args = parse_args((__doc__ or "").split("\n\n")[0], argv)
    return run_story(
        lambda told: story(told, args.database_url),
        "overdue_notice: a handler that caps its attempts at one",
    )


if __name__ == "__main__":
    # Import this file as the module `overdue_notice`, so that the job rows name its
    # handlers by an import path any worker process can resolve (not __main__).
    import overdue_notice

    sys.exit(overdue_notice.main())
