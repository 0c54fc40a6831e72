"""BasicHTTP sends of durable executions on real oban jobs and real HTTP on loopback.

A ``<send type="basichttp">`` the executor's allow-list lets through is a ``PostWorker``
job stored in the step; the job POSTs to a loopback receiver (``statifier.testing.HttpReceiver``)
and a refusal or a final failure comes back to the chart as ``error.communication``,
through ``Executions.send_failed`` keyed by the job.
"""

from __future__ import annotations

from typing import Any

import statifier
from statifier.basichttp import Locations, OutboundPolicy
from statifier.core import planner
from statifier.testing import HttpReceiver
from statifier_oban import Config
from statifier_oban.executions import PostWorker, _post_jobs
from statifier_oban.testing import Clock
from statifier_persistence import Executions, Stepped

from oban_support.common import NS, database_fixture, wait_until
from oban_support.executions import running_rig
from oban_support.harness import Servers, servers_fixture
from tests.spans import traced

database = database_fixture()
servers = servers_fixture()

POST_WORKER = "statifier_oban.executions.PostWorker"
LOOPBACK = OutboundPolicy(hosts=("127.0.0.1",), networks=("127.0.0.0/8",), ports=None)


def sender(url: str, *, send: str = "") -> statifier.Machine:
    """Sends ``ping`` (with ``n=1``) to ``url`` on entry; an error.communication is kept in
    ``why`` and ends the chart in ``failed``."""
    send = send or (
        f'<send id="h" type="basichttp" event="ping" target="{url}"><param name="n" expr="1"/>'
        "</send>"
    )
    return statifier.compile(
        f'<scxml {NS} initial="s" name="sender"><datamodel><data id="why"/></datamodel>'
        f'<state id="s"><onentry>{send}</onentry>'
        '<transition event="error.communication" target="failed">'
        '<assign location="why" expr="_event.data"/></transition></state>'
        '<final id="failed"/></scxml>'
    )


def _post_queue(config: Config) -> str:
    """The queue POST jobs go to: the invoke queue, else the timers queue."""
    return config.invoke_queue or config.timers_queue


async def post_jobs(executions: Executions, scope: str) -> list[tuple[str, int, int, Any]]:
    """``(state, attempt, max_attempts, args)`` of the execution's POST jobs."""
    assert executions.pool is not None
    async with executions.pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT state::text, attempt, max_attempts, args FROM oban_jobs"
            " WHERE worker = %s AND args->>'scope' = %s ORDER BY id",
            (POST_WORKER, scope),
        )
        return [tuple(row) for row in await cursor.fetchall()]


async def test_every_send_is_refused_at_once_until_the_host_allows_hosts(servers: Servers) -> None:
    async with HttpReceiver() as receiver, running_rig(servers) as rig:
        created = await rig.executions.create(sender(receiver.url()), execution_id="refused")
        assert created.execution.outcome is not None
        assert created.execution.outcome["configuration"] == ["failed"]
        _, state = await rig.executions.load("refused")
        assert state.datamodel["why"] == {
            "message": "no outbound BasicHTTP host is allowed (the host's allow-list is empty)"
        }
        assert await post_jobs(rig.executions, "refused") == []
    assert receiver.requests == []


async def test_an_allowed_send_is_posted_by_a_job(servers: Servers) -> None:
    async with HttpReceiver() as receiver, running_rig(servers, basichttp=LOOPBACK) as rig:
        await rig.executions.create(sender(receiver.url("/in")), execution_id="poster")
        (got,) = await receiver.wait_for(1)
        ((_, attempt, max_attempts, args),) = await wait_until(
            lambda: _completed(rig.executions, "poster"), what="the POST job completed"
        )
        assert (attempt, max_attempts) == (1, LOOPBACK.attempts)
        assert (got.target, got.body) == ("/in", b"_scxmleventname=ping&n=1")
        assert got.headers["idempotency-key"] == f"poster/{await _job_id(rig.executions)}"
        assert args["url"] == receiver.url("/in")
        execution = await rig.executions.get("poster")
        assert execution.status == "active"


async def _completed(executions: Executions, scope: str) -> list[tuple[str, int, int, Any]]:
    jobs = await post_jobs(executions, scope)
    return jobs if jobs and all(job[0] == "completed" for job in jobs) else []


async def _job_id(executions: Executions) -> int:
    assert executions.pool is not None
    async with executions.pool.connection() as conn:
        row = await (
            await conn.execute("SELECT max(id) FROM oban_jobs WHERE worker = %s", (POST_WORKER,))
        ).fetchone()
    assert row is not None
    return int(row[0])


async def test_a_final_failure_raises_error_communication_once(servers: Servers) -> None:
    rig_options: dict[str, Any] = {"basichttp": LOOPBACK}
    async with HttpReceiver(statuses=[404]) as receiver, running_rig(servers, **rig_options) as rig:
        await rig.executions.create(sender(receiver.url()), execution_id="lost")
        execution = await wait_until(
            lambda: _ended(rig.executions, "lost"), what="the failure reached the chart"
        )
        assert execution.outcome["configuration"] == ["failed"]
        _, state = await rig.executions.load("lost")
        assert state.datamodel["why"] == {"message": "answered 404", "status": 404, "attempts": 1}
        page = await rig.executions.history("lost")
        failed = page.entries[-1]
        assert failed.event is not None
        assert failed.event.name == "error.communication"
        assert failed.trigger.source == "http"
        assert failed.trigger.job_id == await _job_id(rig.executions)
        assert failed.key == f"job:{failed.trigger.job_id}"
        # The job's failure is applied once: a second delivery finds its key applied.
        again = await rig.executions.send_failed(
            "lost", planner.post_failed("h", "again"), key=failed.key
        )
        assert not isinstance(again, Stepped)
    assert len(receiver.requests) == 1


async def _ended(executions: Executions, execution_id: str) -> Any:
    execution = await executions.get(execution_id)
    return execution if execution.status != "active" else None


async def test_a_failure_that_may_pass_is_retried_with_the_same_key(servers: Servers) -> None:
    policy = OutboundPolicy(hosts=("127.0.0.1",), networks=("127.0.0.0/8",), ports=None, attempts=3)
    async with (
        HttpReceiver(statuses=[503, 204]) as receiver,
        running_rig(servers, basichttp=policy) as rig,
    ):
        await rig.executions.create(sender(receiver.url()), execution_id="retried")
        await receiver.wait_for(1)
        clock = Clock(rig.server.oban, [_post_queue(rig.config)])
        ((_, attempt, _, _),) = await wait_until(
            lambda: _in_state(rig.executions, "retried", "retryable"), what="a retry"
        )
        assert attempt == 1
        await clock.advance("10m")  # oban's backoff, passed
        first, second = await receiver.wait_for(2)
        assert first.headers["idempotency-key"] == second.headers["idempotency-key"]
        await wait_until(lambda: _completed(rig.executions, "retried"), what="completion")
        assert (await rig.executions.get("retried")).status == "active"


async def _in_state(executions: Executions, scope: str, wanted: str) -> Any:
    jobs = await post_jobs(executions, scope)
    return jobs if jobs and jobs[-1][0] == wanted else None


async def test_the_last_attempt_s_failure_reaches_the_chart(servers: Servers) -> None:
    policy = OutboundPolicy(hosts=("127.0.0.1",), networks=("127.0.0.0/8",), ports=None, attempts=2)
    failing = HttpReceiver(statuses=[500])
    async with failing as receiver, running_rig(servers, basichttp=policy) as rig:
        await rig.executions.create(sender(receiver.url()), execution_id="gave_up")
        await wait_until(lambda: _in_state(rig.executions, "gave_up", "retryable"), what="retry")
        await Clock(rig.server.oban, [_post_queue(rig.config)]).advance("10m")
        await wait_until(lambda: _ended(rig.executions, "gave_up"), what="the failure")
        _, state = await rig.executions.load("gave_up")
        assert state.datamodel["why"] == {"message": "answered 500", "status": 500, "attempts": 2}
    assert len(receiver.requests) == 2


async def test_the_worker_checks_the_address_it_connects_to(servers: Servers) -> None:
    # The step allows the name; the job, resolving it to loopback, refuses to connect.
    by_name = OutboundPolicy(hosts=("localhost",), ports=None)
    async with HttpReceiver() as receiver, running_rig(servers, basichttp=by_name) as rig:
        await rig.executions.create(sender(receiver.url(host="localhost")), execution_id="rebound")
        await wait_until(lambda: _ended(rig.executions, "rebound"), what="the refusal")
        _, state = await rig.executions.load("rebound")
        assert "is not public" in state.datamodel["why"]["message"]
    assert receiver.requests == []


async def test_a_delayed_send_posts_when_it_fires(servers: Servers) -> None:
    async with HttpReceiver() as receiver, running_rig(servers, basichttp=LOOPBACK) as rig:
        delayed = f'<send type="basichttp" event="later" delay="1h" target="{receiver.url()}"/>'
        await rig.executions.create(sender("", send=delayed), execution_id="later")
        await Clock(rig.server.oban, [rig.config.timers_queue]).advance("1h")
        (got,) = await receiver.wait_for(1)
        assert got.body == b"_scxmleventname=later"


async def test_a_post_failing_after_the_execution_ended_is_discarded(servers: Servers) -> None:
    rig_options: dict[str, Any] = {"basichttp": LOOPBACK}
    async with HttpReceiver(statuses=[404]) as receiver, running_rig(servers, **rig_options) as rig:
        chart = statifier.compile(
            f'<scxml {NS} initial="s"><state id="s"><onentry><send type="basichttp" '
            f'event="bye" target="{receiver.url()}"/></onentry>'
            '<transition event="done" target="end"/></state><final id="end"/></scxml>'
        )
        # The POST job must run after the execution ended: run first, its failure would
        # step into the live execution (no transition takes it) and the job complete.
        queue = _post_queue(rig.config)
        await rig.server.oban.pause_queue(queue)
        try:
            await rig.executions.create(chart, execution_id="ended")
            await rig.executions.step("ended", statifier.Event(name="done"))
        finally:
            await rig.server.oban.resume_queue(queue)
        ((state, _, _, _),) = await wait_until(
            lambda: _in_state(rig.executions, "ended", "cancelled"), what="the job cancelled"
        )
        assert state == "cancelled"
    assert len(receiver.requests) == 1


async def test_executions_have_the_location_the_host_gives(servers: Servers) -> None:
    locations = Locations("https://app.example/base", b"k" * 16)
    machine = statifier.compile(
        f'<scxml {NS}><datamodel><data id="here" '
        "expr=\"_ioprocessors['basichttp']['location']\"/></datamodel><state id=\"s\"/></scxml>"
    )
    async with running_rig(servers, locations=locations) as rig:
        await rig.executions.create(machine, execution_id="here/1")
        _, state = await rig.executions.load("here/1")
        assert state.datamodel["here"] == locations.location("here/1")
        assert state.datamodel["here"].startswith("https://app.example/base/basichttp/here%2F1/")
        assert rig.executions.basichttp is locations


def test_the_worker_is_public_at_the_path_rows_name() -> None:
    assert f"{PostWorker.__module__}.{PostWorker.__name__}" == POST_WORKER


async def test_a_post_continues_the_trace_of_the_step_that_sent_it(servers: Servers) -> None:
    async with HttpReceiver() as receiver, running_rig(servers, basichttp=LOOPBACK) as rig:
        with traced() as tracing:
            await rig.executions.create(sender(receiver.url()), execution_id="traced")
            (got,) = await receiver.wait_for(1)
    (create,) = tracing.named("Create:sender")
    version, trace_id, parent_id, _flags = got.headers["traceparent"].split("-")
    assert (version, trace_id, parent_id) == ("00", create.trace_id, create.span_id)
    assert "baggage" not in got.headers


def test_a_post_job_s_carried_trace_is_read_as_untrusted() -> None:
    good = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    assert _post_jobs.carried({"trace_context": good}) == good
    garbage: tuple[object, ...] = (
        None, [], {}, {"trace_context": "x"}, {"trace_context": {"traceparent": 1}}
    )  # fmt: skip
    for meta in garbage:
        assert _post_jobs.carried(meta) is None
