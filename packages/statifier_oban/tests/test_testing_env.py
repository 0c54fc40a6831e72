"""``statifier_oban.testing.DurableEnv``: real executions, real workers, a clock the test moves.

Every test uses the plugin's ``durable_env`` fixture (a fresh database from this run's
template, see ``conftest.py``) or opens an environment of its own on
``statifier_database_url``. Nothing sleeps: a week passes in one ``advance``.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import statifier
from psycopg import AsyncConnection
from statifier.basichttp import OutboundPolicy
from statifier.testing import ChartAssertionError, HttpReceiver, UnexpectedChartError
from statifier_oban import ConfigError, Error, Ok
from statifier_oban.children import MapHandler
from statifier_oban.testing import Clock, DurableEnv, RanJob
from statifier_oban.workers import TIMER_WORKER

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
CARD = statifier.compile((EXAMPLES / "card_authorization.scxml").read_text())
BATCH = statifier.compile((EXAMPLES / "order_batch.scxml").read_text())

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python"'

PING = statifier.compile(
    f"""<scxml {NS} name="ping" initial="waiting">
      <datamodel><data id="delay" expr="'1h'"/><data id="pings" expr="0"/></datamodel>
      <state id="waiting">
        <onentry><send event="ping" delayexpr="delay"/></onentry>
        <transition event="ping" cond="pings &lt; 2" target="waiting">
          <assign location="pings" expr="pings + 1"/>
        </transition>
        <transition event="ping" target="done"/>
      </state>
      <final id="done"/>
    </scxml>"""
)
"""Pings itself every ``delay``, three times: each timer is scheduled by the step of the
one before, so three firings in one ``advance`` prove the clock stops at each due time."""

CAPTURE = statifier.compile(
    f"""<scxml {NS} name="capture" initial="capturing">
      <datamodel><data id="result" expr="None"/></datamodel>
      <state id="capturing">
        <onentry><send id="give_up" event="timeout" delay="30s"/></onentry>
        <invoke id="cap" type="payments:capture"><param name="amount" expr="125"/></invoke>
        <transition event="done.invoke.cap" target="settled">
          <assign location="result" expr="_event.data"/>
        </transition>
        <transition event="error.communication.invoke.cap" target="failed">
          <assign location="result" expr="_event.data"/>
        </transition>
        <transition event="timeout" target="timed_out"/>
      </state>
      <final id="settled"/>
      <final id="failed"/>
      <final id="timed_out"/>
    </scxml>"""
)


SLOW_PRICE_ORDER = statifier.compile(
    f"""<scxml {NS} name="price_order" initial="quoting">
      <datamodel><data id="item" expr="None"/></datamodel>
      <state id="quoting">
        <onentry><send event="quoted" delay="1h"/></onentry>
        <transition event="quoted" target="priced"/>
      </state>
      <final id="priced">
        <donedata><param name="order" expr="item['order']"/></donedata>
      </final>
    </scxml>"""
)
"""The batch's child chart with its quote an hour away. The example's own quote is due
300 ms of real time after the child starts, and the wall clock runs on in a durable test
(ADR 26): under load, settling, listing and cancelling took longer than that, and a quote
won against the cancellation's notice. An hour is a margin no test run reaches."""


async def job_rows(env: DurableEnv, scope: str) -> list[tuple[Any, ...]]:
    """``(worker, state, attempt, attempted_by)`` of the scope's jobs, oldest first."""
    async with env.pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT worker, state::text, attempt, attempted_by FROM oban_jobs "
            "WHERE args->>'scope' = %s ORDER BY id",
            [scope],
        )
        return list(await cursor.fetchall())


async def due_at(conn: AsyncConnection[Any], scope: str) -> list[Any]:
    cursor = await conn.execute(
        "SELECT scheduled_at FROM oban_jobs WHERE args->>'scope' = %s ORDER BY id", [scope]
    )
    return [row[0] for row in await cursor.fetchall()]


# -- the card: a week in one call -------------------------------------------------------------


async def test_the_hold_fires_once_after_seven_days_through_a_real_worker(
    durable_env: DurableEnv,
) -> None:
    env = durable_env
    await env.executions.create(CARD, execution_id="card_b")
    await env.assert_timer("card_b", "hold", event="authorization.expired", due="7d")
    assert await env.advance("6d23h") == []
    await env.assert_active("card_b", "authorized")
    (ran,) = await env.advance("1h")
    assert (ran.kind, ran.scope, ran.event, ran.send_id, ran.attempt, ran.outcome) == (
        "timer",
        "card_b",
        "authorization.expired",
        "hold",
        1,
        "completed",
    )
    await env.assert_done("card_b", "expired")
    # The worker's path: our fetch marked it (attempted_by), the ack completed it, and the
    # step was keyed by the job, as a worker keys it.
    (row,) = await job_rows(env, "card_b")
    assert row[:3] == (TIMER_WORKER, "completed", 1)
    assert row[3][0].startswith("statifier-testing-")
    assert await env.advance("30d") == []  # once: nothing left to fire
    execution = await env.executions.get("card_b")
    assert execution.step_count == 2


async def test_a_capture_takes_the_hold_down_and_nothing_fires(durable_env: DurableEnv) -> None:
    env = durable_env
    await env.executions.create(CARD, execution_id="card_a")
    await env.executions.step("card_a", statifier.Event(name="capture.requested"))
    await env.assert_no_timer("card_a")
    assert await env.advance("8d") == []
    await env.executions.step("card_a", statifier.Event(name="capture.succeeded"))
    await env.assert_done("card_a", "settled", captures=1)
    assert [row[1] for row in await job_rows(env, "card_a")] == ["cancelled"]


async def test_timers_fire_in_due_order_and_a_timer_a_step_schedules_fires_in_the_same_advance(
    durable_env: DurableEnv,
) -> None:
    env = durable_env
    for name, delay in (("slow", "200m"), ("fast", "1h"), ("mid", "150m")):
        await env.executions.create(PING, execution_id=name, datamodel={"delay": delay})
    ran = await env.advance("10h")
    assert [(r.scope, r.event) for r in ran] == [
        ("fast", "ping"),  # 1h
        ("fast", "ping"),  # 2h: scheduled by the step of the first
        ("mid", "ping"),  # 2h30m
        ("fast", "ping"),  # 3h
        ("slow", "ping"),  # 3h20m
        ("mid", "ping"),  # 5h
        ("slow", "ping"),  # 6h40m
        ("mid", "ping"),  # 7h30m
        ("slow", "ping"),  # 10h
    ]
    for name in ("fast", "mid", "slow"):
        await env.assert_done(name, "done")


async def test_the_clock_moves_the_due_times_by_exactly_the_span(durable_env: DurableEnv) -> None:
    env = durable_env
    await env.executions.create(PING, execution_id="p", datamodel={"delay": "3h"})
    async with env.pool.connection() as conn:
        (before,) = await due_at(conn, "p")
        assert await env.advance("1h") == []
        (after,) = await due_at(conn, "p")
        assert before - after == timedelta(hours=1)
        assert env.elapsed_ms == 3_600_000
        # Stopping on the way at a due time moves the others by the same total.
        await env.executions.create(PING, execution_id="q", datamodel={"delay": "45m"})
        (q_before,) = await due_at(conn, "q")
        ran = await env.advance("1h")
        assert [r.scope for r in ran] == ["q"]
        (p_after, *_) = await due_at(conn, "p")
        assert after - p_after == timedelta(hours=1)
        assert env.elapsed_ms == 7_200_000
        q_rows = await due_at(conn, "q")
        assert q_rows[0] < q_before


async def test_a_span_is_a_duration_milliseconds_or_a_timedelta(durable_env: DurableEnv) -> None:
    env = durable_env
    await env.advance(timedelta(minutes=1))
    await env.advance(60_000)
    await env.advance("1min")
    assert env.elapsed_ms == 180_000
    assert env.now_ms >= 180_000


# -- invocations answered by the test -----------------------------------------------------------


async def test_a_scripted_invocation_answers_at_once(durable_env: DurableEnv) -> None:
    env = durable_env
    env.invocations("payments:capture").answer(Ok({"capture_id": "c1"}))
    await env.executions.create(CAPTURE, execution_id="c")
    ran = await env.settle()
    assert [(r.kind, r.invoke_id, r.outcome) for r in ran] == [("invocation", "cap", "completed")]
    await env.assert_done("c", "settled")
    await env.assert_datamodel("c", result={"capture_id": "c1"})
    (run,) = env.script("payments:capture").runs
    assert (run.scope, run.invoke.invoke_id, run.invoke.params, run.attempt) == (
        "c",
        "cap",
        {"amount": 125},
        1,
    )


async def test_a_held_invocation_times_out_and_its_late_answer_is_declined(
    durable_env: DurableEnv,
) -> None:
    env = durable_env
    calls = env.invocations("payments:capture")  # held until released
    await env.executions.create(CAPTURE, execution_id="c")
    (held,) = await env.settle()
    assert held.outcome == "held"
    assert [run.invoke.invoke_id for run in calls.held] == ["cap"]
    report = await env.describe("c")
    assert "    invocation cap (job 2, executing, held by the test)" in report.splitlines()
    await env.advance("29s")
    await env.assert_active("c", "capturing")
    await env.advance("1s")
    await env.assert_done("c", "timed_out")
    (released,) = await calls.release(Ok({"capture_id": "late"}))
    assert released.invoke.invoke_id == "cap"
    assert calls.held == []
    await env.assert_datamodel("c", result=None)  # SCXML 6.4: never delivered
    assert env.ran[-1].outcome == "cancelled"  # discarded: invocation_not_live
    with pytest.raises(LookupError, match="no held run of 'payments:capture'"):
        await calls.release()


async def test_a_failed_invocation_is_retried_after_the_backoff_advance_skips(
    durable_env: DurableEnv,
) -> None:
    env = durable_env

    def flaky(invoke: Any, ctx: Any) -> Any:
        return Error("gateway down") if ctx.attempt < 2 else Ok({"capture_id": "c2"})

    env.invocations("payments:capture", max_attempts=2).answer(flaky)
    await env.executions.create(CAPTURE, execution_id="c")
    first = await env.settle()
    assert [(r.kind, r.attempt, r.outcome) for r in first] == [("invocation", 1, "retryable")]
    # oban's backoff after attempt 1: 15 s + 2**1, plus up to 10%: 17 to 18 s (the chart's
    # own timeout is at 30 s).
    assert await env.advance("16s") == []
    rest = await env.advance("10s")
    assert [(r.kind, r.attempt, r.outcome) for r in rest] == [("invocation", 2, "completed")]
    await env.assert_done("c", "settled")
    await env.assert_datamodel("c", result={"capture_id": "c2"})


async def test_an_invocation_failing_its_last_attempt_is_heard_by_the_chart(
    durable_env: DurableEnv,
) -> None:
    env = durable_env
    env.invocations("payments:capture").answer(Error("card declined"))
    await env.executions.create(CAPTURE, execution_id="c")
    await env.settle()
    await env.assert_done("c", "failed")
    await env.assert_datamodel(
        "c", result={"reason": "run_failed", "attempts": 1, "detail": "'card declined'"}
    )


async def test_an_invoke_type_nobody_scripted_is_refused_by_the_chart(
    durable_env: DurableEnv,
) -> None:
    env = durable_env
    with env.expect_error("error.execution") as errors:
        await env.executions.create(CAPTURE, execution_id="c")
        await env.settle()
    assert "payments:capture" in errors[0].message


# -- fan-outs -----------------------------------------------------------------------------------

QUOTE = statifier.compile(
    f"""<scxml {NS} name="quote_order" initial="quoting">
      <datamodel><data id="item" expr="None"/><data id="total" expr="None"/></datamodel>
      <state id="quoting">
        <invoke id="quote" type="pricing:quote"><param name="item" expr="item"/></invoke>
        <transition event="done.invoke.quote" target="quoted">
          <assign location="total" expr="_event.data['total']"/>
        </transition>
        <transition event="error.communication.invoke.quote" target="rejected"/>
      </state>
      <final id="quoted"><donedata><param name="total" expr="total"/></donedata></final>
      <final id="rejected"/>
    </scxml>"""
)

QUOTE_ALL = statifier.compile(
    f"""<scxml {NS} name="quote_all" initial="quoting">
      <datamodel><data id="orders" expr="[]"/><data id="problem" expr="None"/></datamodel>
      <state id="quoting">
        <invoke id="quotes" type="statifier:map">
          <param name="items" expr="orders"/>
          <param name="chart" expr="'quote_order'"/>
          <param name="failed_states" expr="['rejected']"/>
        </invoke>
        <transition event="done.invoke.quotes" target="quoted"/>
        <transition event="error.communication.invoke.quotes" target="needs_attention">
          <assign location="problem" expr="_event.data"/>
        </transition>
      </state>
      <final id="quoted"/>
      <final id="needs_attention"/>
    </scxml>"""
)


async def test_a_fan_out_with_one_failing_child(statifier_database_url: str) -> None:
    async with DurableEnv.open(
        statifier_database_url, handlers={"statifier:map": MapHandler}
    ) as env:

        def quote(invoke: Any, ctx: Any) -> Any:
            item = invoke.params["item"]
            return Error("out of stock") if item["sku"] == "b" else Ok({"total": item["qty"]})

        env.invocations("pricing:quote").answer(quote)
        await env.executions.register(QUOTE)
        orders = [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}, {"sku": "c", "qty": 3}]
        await env.executions.create(QUOTE_ALL, execution_id="batch", datamodel={"orders": orders})
        ran = await env.settle()
        assert sorted(r.kind for r in ran) == [
            "child start",
            "child start",
            "child start",
            "invocation",  # the map
            "invocation",  # three quotes
            "invocation",
            "invocation",
            "settlement",
        ]
        await env.assert_done("batch", "needs_attention")
        _, state = await env.load("batch")
        problem = state.datamodel["problem"]
        assert problem["reason"] == "children_failed"
        assert problem["failed"] == [1]
        assert problem["results"] == [{"total": 1}, None, {"total": 3}]


async def test_the_example_batch_cancels_the_rest_when_one_order_is_cancelled(
    statifier_database_url: str,
) -> None:
    # examples/order_batch.scxml (first_error), unchanged; one child is cancelled before
    # any order is quoted.
    async with DurableEnv.open(
        statifier_database_url, handlers={"statifier:map": MapHandler}
    ) as env:
        await env.executions.register(SLOW_PRICE_ORDER)
        orders = [{"order": f"o{n}", "qty": 1, "unit_cents": 100 * n} for n in range(3)]
        await env.executions.create(BATCH, execution_id="batch", datamodel={"orders": orders})
        await env.settle()  # the map and the three child starts
        children: dict[int | None, str] = {
            e.parent.index: e.id
            for e in (await env.executions.list()).executions
            if e.parent is not None and e.parent.execution_id == "batch"
        }
        assert set(children) == {0, 1, 2}
        await env.executions.cancel(children[1])
        await env.advance("1s")
        await env.assert_done("batch", "needs_attention")
        _, state = await env.load("batch")
        assert state.datamodel["problem"]["reason"] == "child_failed"
        assert state.datamodel["problem"]["index"] == 1
        for index in (0, 2):  # the cascade cancelled the others before their quotes
            await env.assert_status(children[index], "cancelled")
        await env.advance("2h")  # and their quotes, now due, are gone with them
        for index in (0, 2):
            await env.assert_status(children[index], "cancelled")


# -- errors -------------------------------------------------------------------------------------

BROKEN = statifier.compile(
    f"""<scxml {NS} name="broken" initial="waiting">
      <datamodel><data id="total" expr="0"/></datamodel>
      <state id="waiting">
        <onentry><send event="tick" delay="1h"/></onentry>
        <transition event="tick" target="ticked">
          <assign location="total" expr="total + _event.data['amount']"/>
        </transition>
      </state>
      <state id="ticked"/>
    </scxml>"""
)


async def test_an_unexpected_error_fails_the_advance_that_raised_it(
    durable_env: DurableEnv,
) -> None:
    env = durable_env
    await env.executions.create(BROKEN, execution_id="b")
    with pytest.raises(UnexpectedChartError) as caught:
        await env.advance("1h")
    lines = str(caught.value).splitlines()
    assert lines[0] == (
        "the chart raised 1 unexpected error event during 'advance 1h' (allow them with "
        "allow_errors(...) or expect them with expect_error(...)):"
    )
    assert lines[1].startswith("  [b] error.execution at line 6: ")
    assert [where for where, _ in caught.value.errors] == ["b"]
    await env.assert_active("b", "ticked")  # the step itself committed
    env.check_errors()  # reported once


async def test_expected_and_allowed_errors_pass(durable_env: DurableEnv) -> None:
    env = durable_env
    await env.executions.create(BROKEN, execution_id="b1")
    with env.expect_error("error.execution"):
        await env.advance("1h")
    with (
        pytest.raises(ChartAssertionError, match=re.escape("expected an error matching 'error'")),
        env.expect_error(),
    ):
        await env.advance("1h")
    env.allow_errors("error.execution")
    await env.executions.create(BROKEN, execution_id="b2")
    await env.advance("1h")


async def test_a_chart_that_keeps_work_due_at_once_is_stopped(statifier_database_url: str) -> None:
    spin = statifier.compile(
        f"""<scxml {NS} initial="s">
          <state id="s">
            <onentry><send event="again" delay="1ms"/></onentry>
            <transition event="again" target="s"/>
          </state>
        </scxml>"""
    )
    async with DurableEnv.open(statifier_database_url, max_jobs=5) as env:
        await env.executions.create(spin, execution_id="spin")
        with pytest.raises(ChartAssertionError, match=r"^5 jobs ran and more are due"):
            await env.advance("7d")


# -- reports ------------------------------------------------------------------------------------


async def test_a_failed_check_shows_where_the_execution_stood(durable_env: DurableEnv) -> None:
    env = durable_env
    await env.executions.create(CARD, execution_id="card")
    await env.advance("1d")
    with pytest.raises(ChartAssertionError) as caught:
        await env.assert_done("card", "settled")
    lines = str(caught.value).splitlines()
    assert lines[0] == "expected card to be completed, not active"
    assert re.fullmatch(
        r"  execution card \(chart card_authorization\), active after 1 step, "
        r"at t=1d( [0-9.]+m?s)? \(the clock moved 1d\)",
        lines[1],
    ), lines[1]
    assert lines[2:5] == [
        "  active: authorized",
        "  datamodel: {'captures': 0}",
        "  last steps (oldest first):",
    ]
    assert re.fullmatch(r"    t=\d+ms by the test -> active in authorized", lines[5]), lines[5]
    assert lines[6] == "  pending jobs:"
    assert re.fullmatch(
        r"    timer 'authorization.expired' \(send_id hold\) due in 5d 23h 59m 5\d(\.\d+)?s "
        r"\(job 1, scheduled\)",
        lines[7],
    ), lines[7]
    assert len(lines) == 8


@pytest.mark.parametrize(
    ("check", "message"),
    [
        (lambda env: env.assert_active("card", "capturing"), "expected 'capturing' to be active"),
        (
            lambda env: env.assert_active("card", "capture"),
            "the chart has no state 'capture'; did you mean 'capturing'?",
        ),
        (
            lambda env: env.assert_status("card", "completed"),
            "expected card to be completed, not active",
        ),
        (
            lambda env: env.assert_datamodel("card", captures=1),
            "the datamodel differs:\n  captures: expected 1, found 0",
        ),
        (
            lambda env: env.assert_timer("card", "hold", due="6d"),
            "expected a pending timer (send_id 'hold') due in 6d",
        ),
        (
            lambda env: env.assert_no_timer("card"),
            "expected no pending timer; 'authorization.expired' (send_id hold, job 1) is scheduled",
        ),
    ],
)
async def test_each_check_says_what_failed(
    durable_env: DurableEnv, check: Any, message: str
) -> None:
    await durable_env.executions.create(CARD, execution_id="card")
    with pytest.raises(ChartAssertionError) as caught:
        await check(durable_env)
    assert str(caught.value).startswith(message + "\n  execution card")


async def test_the_ran_jobs_are_recorded(durable_env: DurableEnv) -> None:
    env = durable_env
    await env.executions.create(CARD, execution_id="card")
    ran = await env.advance("7d")
    assert env.ran == ran
    assert isinstance(ran[0], RanJob)
    assert ran[0].at_ms >= 7 * 86_400_000
    assert "jobs run: 1" in env.summary()


async def test_a_clock_alone_moves_every_due_time_by_the_whole_span(
    durable_env: DurableEnv,
) -> None:
    env = durable_env
    await env.executions.create(PING, execution_id="a", datamodel={"delay": "1h"})
    await env.executions.create(PING, execution_id="b", datamodel={"delay": "3h"})
    clock = Clock(env.oban, env.queues)
    async with env.pool.connection() as conn:
        (a_before,) = await due_at(conn, "a")
        (b_before,) = await due_at(conn, "b")
        assert await clock.advance("2h") == 7_200_000  # past a's due time: no stop there
        (a_after,) = await due_at(conn, "a")
        (b_after,) = await due_at(conn, "b")
    assert a_before - a_after == b_before - b_after == timedelta(hours=2)
    assert clock.moved_us == 7_200_000_000
    # Nothing ran: a running queue (here, the environment) fires what fell due.
    await env.assert_active("a", "waiting")
    assert [r.scope for r in await env.settle()] == ["a"]


async def test_a_script_keeps_its_attempts(durable_env: DurableEnv) -> None:
    script = durable_env.invocations("payments:capture", max_attempts=3)
    assert durable_env.invocations("payments:capture") is script
    assert script.handler.max_attempts == 3
    with pytest.raises(ConfigError, match="scripted with max_attempts=3"):
        durable_env.invocations("payments:capture", max_attempts=2)
    with pytest.raises(ConfigError, match=r"max_attempts must be in 1\.\.32767"):
        durable_env.invocations("other:type", max_attempts=0)


@pytest.mark.parametrize("bound", [0, -1, True])
async def test_max_jobs_is_a_positive_integer(statifier_database_url: str, bound: Any) -> None:
    with pytest.raises(ConfigError, match="max_jobs must be a positive integer"):
        async with DurableEnv.open(statifier_database_url, max_jobs=bound):
            pass


RENEWAL = statifier.compile(
    f"""<scxml {NS} name="renewal" initial="running">
      <datamodel><data id="notices" expr="[]"/></datamodel>
      <state id="running">
        <invoke id="trial" type="scxml">
          <content>
            <scxml {NS} initial="trying">
              <state id="trying">
                <onentry>
                  <send event="reminder" delay="6d"/><send event="over" delay="7d"/>
                </onentry>
                <transition event="reminder">
                  <send target="#_parent" event="trial.reminder"/>
                </transition>
                <transition event="over" target="ended"/>
              </state>
              <final id="ended"><donedata><param name="days" expr="7"/></donedata></final>
            </scxml>
          </content>
        </invoke>
        <transition event="trial.reminder">
          <assign location="notices" expr="notices + ['reminder']"/>
        </transition>
        <transition event="done.invoke.trial" target="billed">
          <assign location="notices" expr="notices + [_event.data['days']]"/>
        </transition>
      </state>
      <final id="billed"/>
    </scxml>"""
)


async def test_a_child_charts_week_passes_in_one_advance(durable_env: DurableEnv) -> None:
    await durable_env.executions.create(RENEWAL, execution_id="renewal")
    ran = await durable_env.advance("6d")
    assert [job.kind for job in ran] == ["timer", "message"]  # the reminder, told upward
    await durable_env.assert_active("renewal", "running")
    ran = await durable_env.advance("1d")
    assert [job.kind for job in ran] == ["timer", "message"]  # over, then done.invoke.trial
    await durable_env.assert_done("renewal", "billed")
    await durable_env.assert_datamodel("renewal", notices=["reminder", 7])


BASICHTTP_SENDER = f"""<scxml {NS} name="notifier" initial="s">
  <state id="s">
    <onentry><send type="basichttp" event="paid" targetexpr="hook"/></onentry>
    <transition event="error.communication" target="failed"/>
  </state>
  <final id="failed"/>
</scxml>"""


async def test_a_durable_env_makes_the_posts_its_allow_list_lets_through(
    statifier_database_url: str,
) -> None:
    loopback = OutboundPolicy(hosts=("127.0.0.1",), networks=("127.0.0.0/8",), ports=None)
    chart = statifier.compile(BASICHTTP_SENDER)
    async with (
        HttpReceiver() as receiver,
        DurableEnv.open(statifier_database_url, basichttp=loopback) as env,
    ):
        await env.executions.create(chart, execution_id="n1", datamodel={"hook": receiver.url()})
        ran = await env.settle()
        assert [job.kind for job in ran] == ["basichttp post"]
        assert [r.body for r in receiver.requests] == [b"_scxmleventname=paid"]
        await env.assert_active("n1", "s")


async def test_a_durable_env_refuses_posts_by_default(statifier_database_url: str) -> None:
    async with DurableEnv.open(statifier_database_url) as env:
        with env.expect_error("error.communication"):
            await env.executions.create(
                statifier.compile(BASICHTTP_SENDER),
                execution_id="n2",
                datamodel={"hook": "https://a.example/"},
            )
            await env.settle()
        await env.assert_done("n2", "failed")
