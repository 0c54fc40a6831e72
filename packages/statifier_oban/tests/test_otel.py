"""statifier_oban.otel on real oban jobs in this process: the span trees of a step and its
timer, an invocation and a fan-out; parents and links; the metrics of a known workload;
bounds on what spans carry; nothing at all when tracing is off.

Each test runs a rig (``oban_support.executions``: a server-mode Oban with a timers and an
invoke queue of its own, an ``Executions`` installed for the deliveries) under
``tests.spans.traced``: the SDK's in-memory exporter and metric reader. Trees are
compared as ``tests.spans.tree`` prints them.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import psycopg
import pytest
from opentelemetry import propagate, trace
from psycopg import AsyncConnection, pq
from psycopg_pool import AsyncConnectionPool
from statifier import instrumentation
from statifier.core.events import Event
from statifier_oban import otel, schedule, schedule_many, start_session
from statifier_oban.otel import GaugeSampler, SpanRecord
from statifier_oban.otel._spans import read_carrier
from statifier_oban.timers import _schedule
from statifier_oban.workers import TIMER_WORKER
from statifier_persistence import Executions

from oban_support.common import (
    capture_telemetry,
    chart,
    database_fixture,
    execute,
    job_rows,
    unique,
    wait_for_configuration,
    wait_until,
)
from oban_support.executions import Rig, running_rig
from oban_support.harness import Servers, send_delayed, servers_fixture
from tests.spans import Traced, providers, traced, tree

database = database_fixture()
servers = servers_fixture()

HOLD = chart(
    """
    <state id="waiting"><transition event="start" target="holding"/></state>
    <state id="holding">
      <onentry><send id="hold" event="expire" delay="50ms"/></onentry>
      <transition event="expire" target="done"/>
      <transition event="capture" target="captured"/>
      <onexit><cancel sendid="hold"/></onexit>
    </state>
    <final id="captured"/>
    <final id="done"/>
    """,
    name="otel_hold",
)

ECHO = chart(
    """
    <state id="asking">
      <invoke id="ask" type="test:echo"><param name="q" expr="'secret question'"/></invoke>
      <transition event="done.invoke.ask" target="answered"/>
    </state>
    <final id="answered"/>
    """,
    name="otel_echo",
)

CHILD = chart(
    """
    <datamodel><data id="item" expr="None"/></datamodel>
    <state id="start"><transition target="done"/></state>
    <final id="done"/>
    """,
    name="otel_child",
)

MAP = chart(
    """
    <state id="mapping">
      <invoke id="map" type="statifier:map">
        <param name="items" expr="[1, 2]"/>
        <param name="chart" expr="'otel_child'"/>
      </invoke>
      <transition event="done.invoke.map" target="mapped"/>
    </state>
    <final id="mapped"/>
    """,
    name="otel_map",
)


async def finished(executions: Executions, execution_id: str) -> None:
    """Wait until the execution is completed."""

    async def done() -> bool:
        return (await executions.get(execution_id)).status == "completed"

    await wait_until(done, what=f"{execution_id} completed")


async def spans_named(tracing: Traced, name: str, count: int = 1) -> list[SpanRecord]:
    """Wait until ``count`` spans called ``name`` have ended; all of them."""
    await wait_until(lambda: len(tracing.named(name)) >= count, what=f"{count} {name} spans")
    return tracing.named(name)


def trace_of(tracing: Traced, span: SpanRecord) -> list[SpanRecord]:
    """Every finished span of ``span``'s trace."""
    return [other for other in tracing.spans() if other.trace_id == span.trace_id]


async def held_and_fired(rig: Rig, tracing: Traced) -> str:
    """Create a HOLD execution, start it, wait until its timer completed it; its id."""
    created = await rig.executions.create(HOLD)
    execution_id = created.execution.id
    await rig.executions.step(execution_id, Event(name="start", data={"card": "4111-SECRET"}))
    await finished(rig.executions, execution_id)
    await spans_named(tracing, "FireTimer:expire")
    return execution_id


async def test_a_step_and_the_timer_it_arms_are_one_trace(servers: Servers) -> None:
    async with running_rig(servers) as rig:
        with traced() as tracing:
            execution_id = await held_and_fired(rig, tracing)
    step = tracing.named("Step:otel_hold")[0]
    assert tree(trace_of(tracing, step)) == (
        "Step:otel_hold (CLIENT) [test]\n"
        "  ScheduleTimer:expire (PRODUCER) [test]\n"
        "    FireTimer:expire (CONSUMER) [test]\n"
        "      Fire:otel_hold (CLIENT) [test]\n"
        "        CancelTimer:hold (INTERNAL) [test]"
    )
    fire = tracing.named("Fire:otel_hold")[0].attributes
    assert fire["statifier.execution.id"] == execution_id
    assert fire["statifier.execution.status"] == "completed"
    assert fire["statifier.outcome"] == "stepped"
    assert fire["statifier.event.name"] == "expire"
    assert fire["statifier.chart.revision"] == HOLD.identity
    assert fire["db.system.name"] == "postgresql"
    timer = tracing.named("FireTimer:expire")[0].attributes
    assert timer["messaging.system"] == "oban"
    assert timer["messaging.operation.type"] == "process"
    assert timer["messaging.destination.name"] == rig.config.timers_queue
    assert timer["statifier.send.id"] == "hold"
    assert timer["statifier.job.attempt"] == 1
    assert timer["statifier.outcome"] == "completed"
    assert 0 <= timer["statifier.timer.lateness_ms"] < 5000
    scheduled = tracing.named("ScheduleTimer:expire")[0].attributes
    assert scheduled["statifier.timer.delay_ms"] == 50
    assert scheduled["messaging.message.id"] == timer["messaging.message.id"]
    step = tracing.named("Step:otel_hold")[0]
    assert step.attributes["statifier.states"] == ["holding"]
    assert step.attributes["statifier.execution.step_count"] == 2


async def test_a_traced_step_waits_for_the_server_no_more_often_than_an_untraced_one(
    servers: Servers, tmp_path: Path
) -> None:
    """The timer insert of a traced step reads its jobs back for their spans in the store's
    round trip: the frontend sends the same statements and asks the server to answer (a
    Sync, or a Flush in pipeline mode) no more often with tracing on than off, read in
    libpq's protocol trace.

    psycopg sends a Flush only when a result it reads has not arrived yet, so the Flushes
    of a step depend on the server's pace: each kind runs several times, the kinds taking
    turns, and the most Flushes of each are compared. The messages other than Flushes
    are the same in every run."""
    sent: dict[str, list[list[str]]] = {"untraced": [], "traced": []}
    async with running_rig(servers) as rig:
        for run in range(TRACE_RUNS):
            for name, tracing in (("untraced", nullcontext()), ("traced", traced())):
                created = await rig.executions.create(HOLD)
                log = tmp_path / f"{name}.{run}.trace"
                with log.open("w") as file:
                    pool = AsyncConnectionPool(servers.url, open=False, min_size=1, max_size=1)
                    await pool.open()
                    try:
                        stepping = Executions(pool, executor=rig.executor)
                        async with pool.connection() as conn:
                            conn.pgconn.trace(file.fileno())
                            conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
                        with tracing:
                            await stepping.step(created.execution.id, Event(name="start"))
                        async with pool.connection() as conn:
                            conn.pgconn.untrace()  # flushes libpq's buffer
                    finally:
                        await pool.close()
                lines = [line.split("\t") for line in log.read_text().splitlines()]
                sent[name].append([line[2] for line in lines if line[0] == "F"])
                assert (await rig.executions.get(created.execution.id)).status == "active"
    untraced, traced_runs = sent["untraced"], sent["traced"]
    assert [m for m in untraced[0] if m == "Sync"], untraced[0]
    unflushed = {tuple(m for m in run if m != "Flush") for run in untraced + traced_runs}
    assert len(unflushed) == 1, unflushed
    flushes = {name: max(run.count("Flush") for run in runs) for name, runs in sent.items()}
    assert flushes["traced"] <= flushes["untraced"], sent


async def test_timers_sent_in_a_transaction_that_fails_end_their_spans_with_its_error(
    servers: Servers,
) -> None:
    """A traced batch's spans stay open from its insert until its rows are read; when a
    later statement of the pipeline fails first, the answer given that error reads
    nothing, ends every span as failed and leaves the caller's context as it was."""
    async with running_rig(servers) as rig:
        timers = [
            _schedule.prepare(rig.config, unique("scope"), send_delayed(ordinal=n)) for n in (1, 2)
        ]
        with traced() as tracing:
            tracer = instrumentation.current
            assert tracer is not None
            before = trace.get_current_span()

            async def send_then_fail(conn: AsyncConnection[Any]) -> None:
                async with conn.pipeline():
                    read = await _schedule.send_traced(rig.config, tracer, timers, conn=conn)
                    assert trace.get_current_span() is not before  # a timer's span
                    try:
                        await (await conn.execute("SELECT 1 / 0")).fetchall()
                    except psycopg.Error as exc:
                        await read(exc)
                        raise

            async with rig.server.pool.connection() as conn:
                with pytest.raises(psycopg.errors.DivisionByZero):
                    await send_then_fail(conn)
            assert trace.get_current_span() is before
        spans = tracing.named("ScheduleTimer:authorization.expired")
        assert [span.status for span in spans] == ["ERROR", "ERROR"]
        assert not any("messaging.message.id" in span.attributes for span in spans)
        async with rig.server.pool.connection() as conn:
            scopes = [timer.scope for timer in timers]
            found = await conn.execute(
                "SELECT count(*) FROM oban_jobs WHERE args->>'scope' = ANY(%s)", [scopes]
            )
            assert await found.fetchone() == (0,)  # rolled back with the transaction


async def test_timers_of_a_trace_sampled_out_are_counted_without_reading_their_rows(
    servers: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No span records, so nothing wants a timer job's id: a step's timers are counted from
    the insert's row count, no row decoded. A batch with a conflict is still read back (a
    count cannot say which timer existed), and so is one a ``timer.scheduled`` handler
    listens to."""
    read_back: list[int] = []
    reading = _schedule._read_back

    async def counted(*args: Any) -> Any:
        read_back.append(len(args[2]))
        return await reading(*args)

    monkeypatch.setattr(_schedule, "_read_back", counted)
    async with running_rig(servers) as rig:
        stepped = (await rig.executions.create(PAIR)).execution.id
        scope = unique("sampled_out")

        async def send(ordinals: tuple[int, ...]) -> None:
            tracer = instrumentation.current
            assert tracer is not None
            timers = [
                _schedule.prepare(rig.config, scope, send_delayed(ordinal=n, delay_ms=3_600_000))
                for n in ordinals
            ]
            async with (
                rig.server.pool.connection() as conn,
                conn.transaction(),
                conn.pipeline(),
            ):
                read = await _schedule.send_traced(rig.config, tracer, timers, conn=conn)
                await (await conn.execute("SELECT 1")).fetchall()
                await read(None)

        with traced(sampled=False) as tracing:
            await rig.executions.step(stepped, Event(name="start"), key="k:sampled_out")
            assert read_back == []
            assert tracing.metric("statifier.timers.scheduled") == 2
            await send((1, 2))
            assert read_back == []
            assert tracing.metric("statifier.timers.scheduled") == 4
            await send((2, 3))  # 2 exists: read back, and only 3 counted
            assert read_back == [2]
            assert tracing.metric("statifier.timers.scheduled") == 5
            with capture_telemetry() as seen:
                await send((4,))
            assert read_back == [2, 1]
            (fourth,) = await job_rows(
                rig.server.pool, "args->>'scope' = %s AND args->>'ordinal' = '4'", [scope]
            )
            assert [meta["job_id"] for _, meta in seen.events] == [fourth.id]
            assert tracing.metric("statifier.timers.scheduled") == 6
        assert tracing.spans() == []
        with traced() as recorded:
            await send((5,))  # a span that records reads its job's id
        assert read_back == [2, 1, 1]
        (span,) = recorded.named("ScheduleTimer:authorization.expired")
        rows = await job_rows(rig.server.pool, "args->>'scope' = %s ORDER BY id", [scope])
    assert [int(row.args["ordinal"]) for row in rows] == [1, 2, 3, 4, 5]
    assert span.attributes["messaging.message.id"] == rows[-1].id


TRACE_RUNS = 3
"""Steps of each kind whose frontend messages are compared."""


async def test_nothing_of_an_events_data_reaches_a_span(servers: Servers) -> None:
    async with running_rig(servers) as rig:
        with traced() as tracing:
            await held_and_fired(rig, tracing)
            echo = await rig.executions.create(ECHO)
            await finished(rig.executions, echo.execution.id)
    text = json.dumps([span.attributes for span in tracing.spans()])
    assert "SECRET" not in text
    assert "secret question" not in text


PAIR = chart(
    """
    <state id="waiting"><transition event="start" target="armed"/></state>
    <state id="armed">
      <onentry>
        <send id="first" event="one" delay="1h"/>
        <send id="second" event="two" delay="1h"/>
      </onentry>
      <transition event="one"/>
      <transition event="two"/>
    </state>
    """,
    name="otel_pair",
)


async def test_traced_steps_store_their_timers_in_one_batch_each_in_its_own_trace(
    servers: Servers,
) -> None:
    async with running_rig(servers) as rig:
        ids = [(await rig.executions.create(PAIR)).execution.id for _ in range(2)]
        with traced() as tracing:
            # Keyed steps that start together: one group, one transaction (ADR 32); each
            # step's span (no caller's context) begins a trace of its own.
            await asyncio.gather(
                *(rig.executions.step(i, Event(name="start"), key=f"k:{i}") for i in ids)
            )
            async with rig.server.pool.connection() as conn:
                cursor = await conn.execute(
                    "SELECT xmin::text, cmin::text, args->>'scope', args->>'send_id', meta"
                    " FROM oban_jobs WHERE args->>'scope' = ANY(%s)",
                    [ids],
                )
                rows = await cursor.fetchall()
            assert len(rows) == 4
            # One transaction and one statement (its command id) stored all four timers.
            assert len({(row[0], row[1]) for row in rows}) == 1
            await execute(
                rig.server.pool,
                "UPDATE oban_jobs SET scheduled_at = now() WHERE args->>'scope' = ANY(%s)",
                [ids],
            )
            fired = await spans_named(tracing, "FireTimer:one", 2)
            fired += await spans_named(tracing, "FireTimer:two", 2)
            stored = tracing.metric("statifier.timers.scheduled")
    steps = {
        span.attributes["statifier.execution.id"]: span for span in tracing.named("Step:otel_pair")
    }
    assert sorted(steps) == sorted(ids)
    assert len({step.trace_id for step in steps.values()}) == 2
    scheduled = tracing.named("ScheduleTimer:one") + tracing.named("ScheduleTimer:two")
    assert len(scheduled) == 4
    by_send = {}
    for span in scheduled:
        scope = span.attributes["statifier.scope"]
        assert span.parent_id == steps[scope].span_id
        assert span.trace_id == steps[scope].trace_id
        by_send[(scope, span.attributes["statifier.send.id"])] = span
    for _xmin, _cmin, scope, send_id, meta in rows:
        span = by_send[(scope, send_id)]
        carried = meta["trace_context"]["traceparent"].rsplit("-", 1)[0]
        assert carried == f"00-{span.trace_id}-{span.span_id}"
    for span in fired:
        armed = next(s for s in scheduled if s.span_id == span.parent_id)
        assert span.trace_id == armed.trace_id
        assert span.attributes["statifier.send.id"] == armed.attributes["statifier.send.id"]
        assert span.attributes["messaging.message.id"] == armed.attributes["messaging.message.id"]
    assert stored == 4


async def test_a_job_run_starts_a_linked_trace_when_asked(servers: Servers) -> None:
    async with running_rig(servers) as rig:
        with traced(parent="link") as tracing:
            await held_and_fired(rig, tracing)
    fired = tracing.named("FireTimer:expire")[0]
    scheduled = tracing.named("ScheduleTimer:expire")[0]
    assert fired.parent_id is None
    assert fired.trace_id != scheduled.trace_id
    assert fired.links == (scheduled.span_id,)
    assert tree(trace_of(tracing, fired)) == (
        "FireTimer:expire (CONSUMER) [test]\n"
        "  ~> " + scheduled.span_id + "\n"
        "  Fire:otel_hold (CLIENT) [test]\n"
        "    CancelTimer:hold (INTERNAL) [test]"
    )


async def test_an_invocation_is_stored_run_and_answered_in_one_trace(servers: Servers) -> None:
    async with running_rig(servers) as rig:
        with traced() as tracing:
            created = await rig.executions.create(ECHO)
            await finished(rig.executions, created.execution.id)
            await spans_named(tracing, "RunInvoke:test:echo")
    create = tracing.named("Create:otel_echo")[0]
    assert tree(trace_of(tracing, create)) == (
        "Create:otel_echo (CLIENT) [test]\n"
        "  StartInvoke:test:echo (PRODUCER) [test]\n"
        "    RunInvoke:test:echo (CONSUMER) [test]\n"
        "      AnswerInvoke:test:echo (INTERNAL) [test]\n"
        "        Step:otel_echo (CLIENT) [test]"
    )
    run = tracing.named("RunInvoke:test:echo")[0].attributes
    assert run["statifier.invoke.id"] == "ask"
    assert run["statifier.invoke.handler"] == "oban_support.executions:EchoHandler"
    assert run["statifier.outcome"] == "completed"
    answer = tracing.named("AnswerInvoke:test:echo")[0].attributes
    assert answer["statifier.outcome"] == "delivered"
    step = tracing.named("Step:otel_echo")[0].attributes
    assert step["statifier.event.name"] == "done.invoke.ask"


async def test_a_fan_out_and_its_settlement_stay_in_the_parents_trace(servers: Servers) -> None:
    async with running_rig(servers) as rig:
        await rig.executions.register(CHILD)
        with traced() as tracing:
            created = await rig.executions.create(MAP)
            await finished(rig.executions, created.execution.id)
            await spans_named(tracing, "SettleFanOut:map")
    create = tracing.named("Create:otel_map")[0]
    spans = trace_of(tracing, create)
    names = [span.name for span in spans]
    assert names.count("StartChild:map") == 2
    assert names.count("Create:otel_child") == 2
    settle = tracing.named("SettleFanOut:map")[0]
    assert settle.trace_id == create.trace_id
    parent = next(span for span in spans if span.span_id == settle.parent_id)
    assert parent.name == "Create:otel_child"  # the child whose finishing settled it
    stepped = [span for span in spans if span.parent_id == settle.span_id]
    assert [span.name for span in stepped] == ["Step:otel_map"]
    assert stepped[0].attributes["statifier.execution.status"] == "completed"


async def test_a_step_continues_the_callers_trace(servers: Servers) -> None:
    async with running_rig(servers) as rig:
        with traced() as tracing:
            tracer = trace.get_tracer("caller", tracer_provider=providers("api", tracing.exporter))
            headers: dict[str, str] = {}
            with tracer.start_as_current_span("POST /events") as request:
                propagate.inject(headers)
            created = await rig.executions.create(HOLD)
            await rig.executions.step(created.execution.id, Event(name="start"))
            with instrumentation.continued(headers):
                await rig.executions.step(created.execution.id, Event(name="capture"))
            await rig.executions.step(created.execution.id, Event(name="late"))
    caller = format(request.get_span_context().span_id, "016x")
    _, step, late = tracing.named("Step:otel_hold")
    assert step.parent_id == caller
    assert late.parent_id is None
    assert late.attributes["statifier.outcome"] == "discarded"
    assert late.attributes["statifier.reason"] == "completed"


@pytest.mark.parametrize(
    ("headers", "continued"),
    [
        ({"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"}, True),
        ({"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01", "x": "y" * 5000}, True),
        ({"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01" + " " * 1000}, False),
        ({"traceparent": "not a trace context"}, False),
        ({}, False),
    ],
)
def test_continued_reads_only_a_bounded_trace_context(
    headers: dict[str, str], continued: bool
) -> None:
    with traced() as tracing:
        with instrumentation.continued(headers), tracing.instrumentation.span("Step"):
            pass
        with instrumentation.continued(None), tracing.instrumentation.span("Step"):
            pass
    first, second = tracing.spans()
    assert (first.parent_id == "b" * 16) is continued
    assert first.trace_id == "a" * 32 if continued else first.parent_id is None
    assert second.parent_id is None


def test_a_carried_context_is_bounded() -> None:
    entry = "x" * otel.MAX_CARRIER_TEXT
    assert read_carrier({f"k{i}": entry for i in range(otel.MAX_CARRIER_ENTRIES)}) is not None
    assert read_carrier({f"k{i}": "v" for i in range(otel.MAX_CARRIER_ENTRIES + 1)}) is None
    assert read_carrier({"k": entry + "x"}) is None
    assert read_carrier({"k" * (otel.MAX_CARRIER_TEXT + 1): "v"}) is None
    assert read_carrier({"k": 1}) is None
    assert read_carrier(["traceparent"]) is None
    assert read_carrier({}) is None


async def test_a_timer_row_carrying_garbage_fires_in_a_trace_of_its_own(servers: Servers) -> None:
    async with running_rig(servers) as rig:
        created = await rig.executions.create(HOLD)
        execution_id = created.execution.id
        await rig.executions.step(execution_id, Event(name="start"))
        # The row is rewritten before it is due (untrusted storage): a context that is none.
        async with rig.server.pool.connection() as conn:
            await conn.execute(
                "UPDATE oban_jobs SET meta = meta || %s::jsonb, scheduled_at = now() + '1s'"
                " WHERE worker = %s AND args->>'scope' = %s",
                [json.dumps({"trace_context": {"traceparent": ["x"] * 100}}), TIMER_WORKER,
                 execution_id],
            )  # fmt: skip
        with traced() as tracing:
            await finished(rig.executions, execution_id)
            fired = (await spans_named(tracing, "FireTimer:expire"))[0]
    assert fired.parent_id is None
    assert fired.links == ()


async def test_spans_bound_long_names_and_many_states(servers: Servers) -> None:
    long_name = "e" * 1000
    async with running_rig(servers) as rig:
        with traced() as tracing:
            created = await rig.executions.create(HOLD)
            await rig.executions.step(created.execution.id, Event(name=long_name))
    step = tracing.named("Step:otel_hold")[0]
    shown = step.attributes["statifier.event.name"]
    assert shown.startswith("e" * otel.MAX_TEXT + "...")
    assert len(shown) < otel.MAX_TEXT + 40
    span = tracing.instrumentation.span
    with span("FireTimer", event="x" * (otel.MAX_NAME + 1)), span("Fire", states=["s"] * 99):
        pass
    with span("FireTimer", event="x" * otel.MAX_NAME):
        pass
    nested, long, exact = tracing.spans()[-3:]
    assert long.name == "FireTimer:" + "x" * otel.MAX_NAME + "..."
    assert exact.name == "FireTimer:" + "x" * otel.MAX_NAME
    assert nested.attributes["statifier.states"] == ["s"] * otel.MAX_ITEMS


def test_every_fact_and_operation_has_its_mapping() -> None:
    assert set(otel.ATTRIBUTES) == instrumentation.FACTS
    from statifier_oban.otel._attributes import OPERATIONS

    assert tuple(OPERATIONS) == instrumentation.OPERATIONS


async def test_metrics_after_a_known_workload(servers: Servers) -> None:
    runs = 3
    async with running_rig(servers) as rig:
        await rig.executions.register(CHILD)
        sampler = GaugeSampler(rig.server.pool, executions=rig.executions, interval=1)
        before = (await sampler.sample()).executions  # the module's database is shared
        with traced() as tracing:
            for _ in range(runs):
                await held_and_fired(rig, tracing)
            captured = await rig.executions.create(HOLD)
            await rig.executions.step(captured.execution.id, Event(name="start"))
            await rig.executions.step(captured.execution.id, Event(name="capture"))
            await rig.executions.step(captured.execution.id, Event(name="capture"))
            echo = await rig.executions.create(ECHO)
            await finished(rig.executions, echo.execution.id)
            await spans_named(tracing, "RunInvoke:test:echo")
            await schedule(rig.config, unique("idle"), send_delayed(delay_ms=3_600_000))
            await sampler.sample_once()
            metric = tracing.metric
            queue = rig.config.timers_queue
            steps = "statifier.steps"
            assert metric(steps, **{"statifier.operation": "Create"}) == runs + 2
            assert metric(steps, **{"statifier.chart.name": "otel_hold"}) == 3 * runs + 4
            hold_steps = {"statifier.operation": "Step", "statifier.chart.name": "otel_hold"}
            assert metric(steps, **hold_steps, **{"statifier.outcome": "stepped"}) == runs + 2
            assert metric(steps, **hold_steps, **{"statifier.outcome": "discarded"}) == 1
            assert metric(steps, **{"statifier.operation": "Fire"}) == runs
            stored = runs + 2  # the held ones, the captured one, the idle one
            assert metric("statifier.timers.scheduled") == stored
            assert (
                metric("statifier.timers.scheduled", **{"messaging.destination.name": queue})
                == stored
            )
            assert metric("statifier.timers.fired") == runs
            assert metric("statifier.timers.cancelled") == 1  # the capture's; the fires' find none
            assert metric("statifier.timers.discarded") == 0
            assert metric("statifier.timer.lateness") == runs
            assert (
                metric(
                    "statifier.invoke.duration",
                    **{"statifier.invoke.type": "test:echo", "statifier.outcome": "completed"},
                )
                == 1
            )
            for chart_name, made in (("otel_hold", runs + 1), ("otel_echo", 1)):
                labels = {
                    "statifier.execution.status": "completed",
                    "statifier.chart.name": chart_name,
                }
                was = before.get(("completed", chart_name), 0)
                assert metric("statifier.executions", **labels) == was + made
            depth = {"messaging.destination.name": queue, "statifier.job.state": "scheduled"}
            assert metric("statifier.queue.depth", **depth) == 1
            assert metric("statifier.queue.depth", **{"statifier.job.state": "executing"}) == 0


LOOSE = chart(
    """
    <state id="holding">
      <onentry><send id="hold" event="expire" delay="50ms"/></onentry>
      <transition event="expire" target="done"/>
      <transition event="finish" target="done"/>
    </state>
    <final id="done"/>
    """,
    name="otel_loose",
)


async def test_a_timer_of_a_finished_execution_is_discarded(servers: Servers) -> None:
    async with running_rig(servers) as rig:
        with traced() as tracing:
            created = await rig.executions.create(LOOSE)
            await rig.executions.step(created.execution.id, Event(name="finish"))
            fired = (await spans_named(tracing, "FireTimer:expire"))[0]
            discarded = {"statifier.reason": "completed"}
            assert tracing.metric("statifier.timers.discarded", **discarded) == 1
            assert tracing.metric("statifier.timers.fired") == 0
    assert fired.attributes["statifier.outcome"] == "discarded"
    assert fired.attributes["statifier.reason"] == "completed"
    assert tree(trace_of(tracing, fired)) == (
        "Create:otel_loose (CLIENT) [test]\n"
        "  ScheduleTimer:expire (PRODUCER) [test]\n"
        "    FireTimer:expire (CONSUMER) [test]\n"
        "      Fire:otel_loose (CLIENT) [test]"
    )
    assert tracing.named("Fire:otel_loose")[0].attributes["statifier.outcome"] == "discarded"


async def test_an_error_marks_the_span_and_names_only_its_type(servers: Servers) -> None:
    async with running_rig(servers) as rig:
        with traced() as tracing, pytest.raises(Exception, match="SECRET"):
            await rig.executions.step("no-such-SECRET", Event(name="go"))
    (step,) = tracing.named("Step")
    assert step.status == "ERROR"
    assert step.attributes["error.type"] == "statifier_persistence._errors.ExecutionNotFound"
    assert step.attributes["statifier.outcome"] == "error"
    assert not step.events  # no exception event: its message may quote a caller's value


LIVE = chart(
    """
    <state id="waiting"><transition event="start" target="holding"/></state>
    <state id="holding">
      <onentry><send id="hold" event="expire" delay="50ms"/></onentry>
      <transition event="expire" target="done"/>
    </state>
    <state id="done"/>
    """,
    name="otel_live",
)


async def test_a_live_sessions_durable_timer_continues_the_trace_that_armed_it(
    servers: Servers,
) -> None:
    server = await servers.start()
    with traced() as tracing:
        session = await start_session(server.config(), LIVE)
        try:
            tracer = tracing.instrumentation.tracer
            with tracer.start_as_current_span("POST /sessions/events"):
                session.send_event("start")
            await wait_for_configuration(session, "done")
            await wait_until(
                lambda: len(tracing.named("Macrostep:otel_live")) >= 4, what="4 macrosteps"
            )
        finally:
            await session.stop()
    request = tracing.named("POST /sessions/events")[0]
    assert tree(trace_of(tracing, request), attributes=["statifier.macrostep.trigger"]) == (
        "POST /sessions/events (INTERNAL) [test]\n"
        "  Macrostep:otel_live (INTERNAL) [test] statifier.macrostep.trigger=event\n"
        "    ScheduleTimer:expire (PRODUCER) [test]\n"
        "      FireTimer:expire (CONSUMER) [test]\n"
        "        Macrostep:otel_live (INTERNAL) [test] statifier.macrostep.trigger=fired\n"
        "          Macrostep:otel_live (INTERNAL) [test] statifier.macrostep.trigger=event"
    )
    initial = tracing.named("Macrostep:otel_live")[0]
    assert initial.attributes["statifier.macrostep.trigger"] == "initial"
    assert initial.trace_id != request.trace_id


async def test_a_batch_of_timers_is_one_span_and_counts_what_it_stored(servers: Servers) -> None:
    server = await servers.start()
    scope = unique("batch")
    batch = [send_delayed(ordinal=n, delay_ms=3_600_000) for n in (1, 2, 3)]
    with traced() as tracing:
        await schedule_many(server.config(), scope, batch)
        await schedule_many(server.config(), scope, batch)  # a replayed drive: all exist
        stored = tracing.metric("statifier.timers.scheduled")
    first, again = tracing.named(f"ScheduleTimers:{server.queue}")
    assert first.attributes["messaging.batch.message_count"] == 3
    assert first.attributes["statifier.timer.stored"] == 3
    assert first.attributes["statifier.job.conflict"] is False
    assert again.attributes["statifier.timer.stored"] == 0
    assert again.attributes["statifier.job.conflict"] is True
    assert stored == 3
    rows = await job_rows(server.pool, "args->>'scope' = %s", [scope])
    carried = {row.meta["trace_context"]["traceparent"].rsplit("-", 1)[0] for row in rows}
    assert carried == {f"00-{first.trace_id}-{first.span_id}"}  # the batch's span, all three


async def test_a_migration_is_a_span_naming_the_revision_it_moved_to(servers: Servers) -> None:
    moved_to = chart(
        """
        <state id="waiting"><transition event="start" target="done"/></state>
        <final id="done"/>
        """,
        name="otel_hold",
    )
    async with running_rig(servers) as rig:
        created = await rig.executions.create(HOLD)
        with traced() as tracing:
            await rig.executions.migrate(created.execution.id, moved_to, dry_run=True)
            await rig.executions.migrate(created.execution.id, moved_to)
    dry, real = tracing.named("Migrate:otel_hold")
    assert dry.attributes["statifier.outcome"] == "dry_run"
    assert real.attributes["statifier.outcome"] == "migrated"
    assert real.attributes["statifier.chart.revision"] == moved_to.identity
    assert real.attributes["statifier.states"] == ["waiting"]
    assert tracing.metric("statifier.steps", **{"statifier.operation": "Migrate"}) == 2


def test_a_failing_metric_never_breaks_the_traced_step(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with traced() as tracing:

        def broken(*_args: object) -> None:
            raise RuntimeError("meter gone")

        monkeypatch.setattr(tracing.instrumentation.metrics, "ended", broken)
        with tracing.instrumentation.span("Step", chart="c") as span:
            span.set(outcome="stepped")
    assert tracing.named("Step:c")[0].attributes["statifier.outcome"] == "stepped"
    assert "recording the metrics of Step failed" in caplog.text
