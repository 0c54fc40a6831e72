"""Execution history on real PostgreSQL: an entry per change, written in the change's own
transaction (rolled back with it), bounded whatever the chart or the caller sends, read
back checked, paged, pruned by retention; and step results that say whether the event
took a transition."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool
from statifier.core.events import Event
from statifier.values import BRIEF_LENGTH
from statifier_persistence import (
    CorruptExecution,
    Declined,
    ExecutionNotFound,
    Executions,
    History,
    HistoryEntry,
    InvalidArgument,
    Stepped,
    Trigger,
    triggered_by,
)
from statifier_persistence.history import (
    MAX_DATA_BYTES,
    MAX_ITEMS,
    MAX_TEXT_CHARS,
    MAX_VALUE_CHARS,
    HistoryFormatError,
    current_trigger,
)

from persistence_support.common import (
    InjectedFailure,
    OutboxHost,
    TableExecutor,
    chart,
    scalar,
    unique,
)

ORDER = chart(
    """
    <datamodel><data id="total" expr="0"/></datamodel>
    <state id="open">
      <onentry><send id="reminder" event="remind" delay="15m"/></onentry>
      <transition event="invoice.sent" target="invoiced">
        <assign location="total" expr="_event.data['amount'] if _event.data else 0"/>
        <log label="invoiced" expr="total"/>
      </transition>
      <transition event="remind" type="internal"><log label="reminded" expr="'again'"/></transition>
      <transition event="note" type="internal" cond="False"/>
      <transition event="chatty" type="internal">
        <foreach array="list(range(25))" item="i"><log label="n" expr="i"/></foreach>
      </transition>
      <transition event="paid" target="paid"/>
    </state>
    <state id="invoiced">
      <onexit><cancel sendid="reminder"/></onexit>
      <transition event="paid" target="paid"/>
    </state>
    <final id="paid"><donedata><param name="total" expr="total"/></donedata></final>
    """,
    name="order",
)


async def entries(executions: Executions, execution_id: str) -> list[HistoryEntry]:
    """Every entry of the execution, oldest first."""
    return list((await executions.history(execution_id)).entries)


async def test_every_change_writes_one_entry_with_what_it_did(
    executions: Executions, executor: TableExecutor
) -> None:
    execution_id = unique()
    created = await executions.create(ORDER, execution_id=execution_id)
    stepped = await executions.step(
        execution_id, Event(name="invoice.sent", data={"amount": 12}), key="req-1"
    )
    assert isinstance(stepped, Stepped)
    first, second = await entries(executions, execution_id)

    assert (first.seq, first.kind, first.status_before, first.status) == (
        1,
        "created",
        "active",
        "active",
    )
    assert first.configuration_before == ()
    assert first.configuration_after == ("open",)
    assert [(t.send_id, t.event, t.delay_ms) for t in first.timers_armed] == [
        ("reminder", "remind", 15 * 60_000)
    ]
    assert first.detail["chart"]["name"] == "order"
    assert first.event is None
    assert first.transition_taken is None
    assert first == created.entry

    assert (second.seq, second.kind, second.key) == (2, "event", "req-1")
    assert second.trigger == Trigger("api")
    assert second.event is not None
    assert (second.event.name, second.event.data) == ("invoice.sent", {"amount": 12})
    assert second.transition_taken is True
    assert second.unmatched is None
    assert (second.configuration_before, second.configuration_after) == (("open",), ("invoiced",))
    assert [(log.label, log.value) for log in second.logs] == [("invoiced", 12)]
    assert second.at == stepped.execution.updated_at
    assert second == stepped.entry
    assert stepped.execution.history_seq == 2


async def test_an_entry_rolls_back_with_its_failed_step(
    executions: Executions, executor: TableExecutor, store: AsyncConnectionPool
) -> None:
    execution_id = unique()
    await executions.create(ORDER, execution_id=execution_id)
    await executions.step(execution_id, Event(name="invoice.sent"))
    executor.fail.add("cancel")  # leaving `invoiced` cancels the reminder: fails after writing
    with pytest.raises(InjectedFailure):
        await executions.step(execution_id, Event(name="paid"))
    assert [e.seq for e in await entries(executions, execution_id)] == [1, 2]
    assert (await executions.get(execution_id)).history_seq == 2
    rows = await scalar(
        store, "SELECT count(*) FROM statifier_history WHERE execution_id = %s", [execution_id]
    )
    assert rows == 2
    executor.fail.clear()
    done = await executions.step(execution_id, Event(name="paid"))
    assert isinstance(done, Stepped)
    assert done.entry is not None
    assert done.entry.seq == 3  # the failed step used no number
    assert done.entry.timers_cancelled == ("reminder",)
    assert done.entry.detail["outcome"] == {"configuration": ["paid"], "donedata": {"total": 0}}
    assert done.entry.configuration_after == ("paid",)  # where it ended


async def test_an_entry_rolls_back_with_the_callers_transaction(
    executions: Executions, store: AsyncConnectionPool
) -> None:
    execution_id = unique()
    await executions.create(ORDER, execution_id=execution_id)

    class Abort(Exception):
        pass

    async def step_then_abort() -> None:
        async with store.connection() as conn, conn.transaction():
            await executions.step(execution_id, Event(name="paid"), conn=conn)
            raise Abort

    with pytest.raises(Abort):
        await step_then_abort()
    assert [e.kind for e in await entries(executions, execution_id)] == ["created"]


async def test_an_unmatched_event_is_reported_with_a_suggestion_from_the_active_states(
    executions: Executions,
) -> None:
    execution_id = unique()
    await executions.create(ORDER, execution_id=execution_id)
    typo = await executions.step(execution_id, Event(name="invoice.snt"))
    assert isinstance(typo, Stepped)
    assert typo.transition_taken is False
    assert typo.unmatched == (
        "no transition matched external event 'invoice.snt'; did you mean 'invoice.sent'?"
    )
    guarded = await executions.step(execution_id, Event(name="note"))
    assert isinstance(guarded, Stepped)
    assert guarded.transition_taken is False
    assert guarded.unmatched == (
        "no transition matched external event 'note': "
        "no transition for it is enabled in the active states"
    )
    history = await entries(executions, execution_id)
    assert [(e.transition_taken, e.unmatched) for e in history[1:]] == [
        (False, typo.unmatched),
        (False, guarded.unmatched),
    ]
    taken = await executions.step(execution_id, Event(name="remind"))  # targetless, taken
    assert isinstance(taken, Stepped)
    assert taken.transition_taken is True
    assert taken.unmatched is None


async def test_an_event_other_states_take_lists_what_the_active_states_accept(
    executions: Executions,
) -> None:
    execution_id = unique()
    await executions.create(ORDER, execution_id=execution_id)
    await executions.step(execution_id, Event(name="invoice.sent"))
    later = await executions.step(execution_id, Event(name="chatty"))
    assert isinstance(later, Stepped)
    assert later.unmatched == (
        "no transition matched external event 'chatty': the active states take no such "
        "event; the active states accept paid"
    )


async def test_a_fired_timer_is_an_entry_of_its_own_kind(
    executions: Executions, executor: TableExecutor
) -> None:
    execution_id = unique()
    await executions.create(ORDER, execution_id=execution_id)
    delayed = executor.timers[(execution_id, 1)]
    with triggered_by(Trigger("timer", job_id=41)):
        fired = await executions.fire(execution_id, delayed, key="job:41")
    assert isinstance(fired, Stepped)
    assert fired.entry is not None
    entry = fired.entry
    assert (entry.kind, entry.trigger, entry.key) == ("fired", Trigger("timer", 41), "job:41")
    assert entry.event is not None
    assert entry.event.name == "remind"
    assert entry.transition_taken is True
    assert [(log.label, log.value) for log in entry.logs] == [("reminded", "again")]


async def test_cancel_park_unpark_and_migration_are_entries_with_their_trigger(
    executions: Executions,
) -> None:
    execution_id = unique()
    await executions.create(ORDER, execution_id=execution_id)
    with triggered_by(Trigger("operator", detail="statifier-oban executions park")):
        await executions.park(execution_id)
        await executions.unpark(execution_id)
    moved = chart(
        '<datamodel><data id="total" expr="0"/></datamodel>'
        '<state id="open"><transition event="paid" target="paid"/></state><final id="paid"/>',
        name="order",
    )
    migrated = await executions.migrate(execution_id, moved)
    cancelled = await executions.cancel(execution_id)
    assert isinstance(cancelled, Stepped)
    history = await entries(executions, execution_id)
    assert [e.kind for e in history] == [
        "created",
        "parked",
        "unparked",
        "migrated",
        "cancelled",
    ]
    assert [e.seq for e in history] == [1, 2, 3, 4, 5]
    parked, unparked = history[1], history[2]
    assert (parked.status_before, parked.status) == ("active", "needs_migration")
    assert (unparked.status_before, unparked.status) == ("needs_migration", "active")
    assert parked.trigger == Trigger("operator", detail="statifier-oban executions park")
    assert history[3] == migrated.entry
    assert history[3].detail == {"from": ORDER.identity, "to": moved.identity}
    assert history[4].trigger == Trigger("api")  # outside the block again
    assert (history[4].status, history[4].configuration_before) == ("cancelled", ("open",))
    # step_count counts changes of the position; history_seq every change
    execution = await executions.get(execution_id)
    assert (execution.step_count, execution.history_seq) == (3, 5)


@pytest.mark.parametrize(
    ("data", "kept"),
    [
        ("x" * (MAX_DATA_BYTES - 2), True),  # a string of n characters is n + 2 written out
        ("x" * (MAX_DATA_BYTES - 1), False),
        ({"nested": [1, 2.5, None, True, "é"]}, True),
        ("nul\x00inside", False),  # jsonb cannot hold it
        ("lone \ud800 surrogate", False),
        ([[0] * 100] * 100, False),  # shared lists count as what they expand to
        (10**4000, False),
    ],
)
async def test_event_data_is_kept_exactly_when_small_else_rendered_within_bounds(
    executions: Executions, data: Any, kept: bool
) -> None:
    execution_id = unique()
    await executions.create(ORDER, execution_id=execution_id)
    await executions.step(execution_id, Event(name="remind", data=data))
    entry = (await entries(executions, execution_id))[1]
    assert entry.event is not None
    if kept:
        assert (entry.event.data, entry.event.data_clipped) == (data, False)
    else:
        assert entry.event.data_clipped is True
        assert isinstance(entry.event.data, str)
        assert len(entry.event.data) <= MAX_VALUE_CHARS + len("''...")  # brief: "about"


async def test_lists_keep_their_first_items_and_count_the_rest(executions: Executions) -> None:
    execution_id = unique()
    await executions.create(ORDER, execution_id=execution_id)
    stepped = await executions.step(execution_id, Event(name="chatty"))
    assert isinstance(stepped, Stepped)
    assert stepped.entry is not None
    assert [log.value for log in stepped.entry.logs] == list(range(MAX_ITEMS))
    assert stepped.entry.omitted == 25 - MAX_ITEMS
    assert (await entries(executions, execution_id))[1] == stepped.entry


async def test_names_from_callers_are_clipped_and_escaped(executions: Executions) -> None:
    execution_id = unique()
    await executions.create(ORDER, execution_id=execution_id)
    name = "n\x00" + "x" * 3000
    await executions.step(execution_id, Event(name=name))
    entry = (await entries(executions, execution_id))[1]
    assert entry.event is not None
    assert entry.event.name.startswith("n\\x00xxx")
    assert len(entry.event.name) <= MAX_TEXT_CHARS + len("... (2803 more characters)")
    assert entry.unmatched is not None
    assert len(entry.unmatched) < MAX_TEXT_CHARS + 40
    assert BRIEF_LENGTH < MAX_VALUE_CHARS  # entries render more of a value than a message


async def test_history_off_writes_nothing_but_keeps_counting(
    store: AsyncConnectionPool, executor: TableExecutor
) -> None:
    quiet = Executions(store, executor=executor, history=False)
    execution_id = unique()
    created = await quiet.create(ORDER, execution_id=execution_id)
    stepped = await quiet.step(execution_id, Event(name="invoice.snt"))
    assert created.entry is None
    assert isinstance(stepped, Stepped)
    assert stepped.entry is None
    assert stepped.transition_taken is False  # the result says so without history
    assert await entries(quiet, execution_id) == []
    loud = Executions(store, executor=executor)
    await loud.step(execution_id, Event(name="invoice.sent"))
    assert [e.seq for e in await entries(loud, execution_id)] == [3]  # the gap shows


async def test_history_pages_forward_and_backward(executions: Executions) -> None:
    execution_id = unique()
    await executions.create(ORDER, execution_id=execution_id)
    for _ in range(6):
        await executions.step(execution_id, Event(name="remind"))
    page = await executions.history(execution_id, limit=3)
    assert [e.seq for e in page.entries] == [1, 2, 3]
    assert page.after == 3
    page = await executions.history(execution_id, after=page.after, limit=3)
    assert [e.seq for e in page.entries] == [4, 5, 6]
    assert page.after == 6
    page = await executions.history(execution_id, after=6, limit=3)
    assert [e.seq for e in page.entries] == [7]
    assert page.after is None
    tail = await executions.history(execution_id, before=8, limit=2)
    assert [e.seq for e in tail.entries] == [6, 7]
    with pytest.raises(ExecutionNotFound):
        await executions.history(unique())
    with pytest.raises(InvalidArgument):
        await executions.history(execution_id, limit=1001)
    with pytest.raises(InvalidArgument):
        await executions.history(execution_id, after=1, before=3)


async def test_a_stored_entry_is_checked_when_read(
    executions: Executions, store: AsyncConnectionPool
) -> None:
    execution_id = unique()
    await executions.create(ORDER, execution_id=execution_id)
    async with store.connection() as conn:
        await conn.execute(
            "UPDATE statifier_history SET entry = (entry::jsonb || %s::jsonb)::json"
            " WHERE execution_id = %s",
            ['{"kind": "exploded"}', execution_id],
        )
    with pytest.raises(CorruptExecution, match=r"history entry 1: entry\.kind is not one of"):
        await executions.history(execution_id)
    small = Executions(store, executor=TableExecutor(), history=History(max_entry_bytes=100))
    async with store.connection() as conn:
        await conn.execute(
            "UPDATE statifier_history SET entry = (entry::jsonb || %s::jsonb)::json"
            " WHERE execution_id = %s",
            ['{"kind": "created"}', execution_id],
        )
    with pytest.raises(CorruptExecution, match="over the 100 limit"):
        await small.history(execution_id)


def test_the_json_shape_is_pinned_and_reads_back() -> None:
    entry = HistoryEntry.from_json(
        {
            "execution_id": "order_1",
            "seq": 2,
            "at": "2025-01-31T09:30:00.250000Z",
            "kind": "event",
            "trigger": {"source": "timer", "job_id": 7, "detail": None},
            "key": "job:7",
            "event": {"name": "remind", "data": None, "data_clipped": False},
            "transition_taken": True,
            "unmatched": None,
            "configuration_before": ["open"],
            "configuration_after": ["open"],
            "status_before": "active",
            "status": "active",
            "timers_armed": [
                {"send_id": "r", "event": "remind", "target": None, "delay_ms": 90_000}
            ],
            "timers_cancelled": ["old"],
            "sends": [{"event": "ping", "target": "#_parent"}],
            "invocations_started": [{"invoke_id": "fetch", "type": "http"}],
            "invocations_cancelled": [],
            "errors": [{"name": "error.execution", "message": "boom", "line": 3}],
            "logs": [{"label": "l", "value": [1], "value_clipped": False}],
            "detail": {},
            "omitted": 0,
        }
    )
    shape = entry.to_json()
    assert list(shape) == [
        "execution_id",
        "seq",
        "at",
        "kind",
        "trigger",
        "key",
        "event",
        "transition_taken",
        "unmatched",
        "configuration_before",
        "configuration_after",
        "status_before",
        "status",
        "timers_armed",
        "timers_cancelled",
        "sends",
        "invocations_started",
        "invocations_cancelled",
        "errors",
        "logs",
        "detail",
        "omitted",
    ]
    assert shape["at"] == "2025-01-31T09:30:00.250000Z"
    assert shape["timers_armed"][0]["due_at"] == "2025-01-31T09:31:30.250000Z"
    assert HistoryEntry.from_json(json.loads(json.dumps(shape))) == entry
    broken = dict(shape, trigger={"source": "cron", "job_id": None, "detail": None})
    with pytest.raises(HistoryFormatError, match=r"entry.trigger.source is not one of"):
        HistoryEntry.from_json(broken)
    with pytest.raises(HistoryFormatError, match=r"entry.seq is not a count"):
        HistoryEntry.from_json(dict(shape, seq=-1))
    with pytest.raises(HistoryFormatError, match=r"entry.at is not a time with its UTC offset"):
        HistoryEntry.from_json(dict(shape, at="2025-01-31T09:30:00"))
    assert "\n" not in repr(entry)
    assert len(repr(entry)) < 120


async def test_results_print_on_one_short_line(executions: Executions) -> None:
    execution_id = unique()
    created = await executions.create(ORDER, execution_id=execution_id)
    typo = await executions.step(execution_id, Event(name="invoice.snt"))
    page = await executions.list(limit=1)
    for value in (created, typo, created.execution, page, await executions.history(execution_id)):
        text = repr(value)
        assert "\n" not in text, text
        assert len(text) < 200, text
    assert repr(typo) == f"<Stepped {execution_id} active in open, 0 effects, no transition taken>"


async def test_retention_keeps_the_last_entries_of_each_execution_in_batches(
    executions: Executions, store: AsyncConnectionPool
) -> None:
    ids = sorted(unique() for _ in range(3))
    for execution_id in ids:
        await executions.create(ORDER, execution_id=execution_id)
        for _ in range(4):
            await executions.step(execution_id, Event(name="remind"))
    others = await scalar(
        store, "SELECT count(*) FROM statifier_history WHERE NOT execution_id = ANY(%s)", [ids]
    )
    # 3 executions x 5 entries; keeping 2 each deletes 9, in batches of 2: four full
    # batches and one of 1 (plus whatever earlier tests of the module left over 2 each).
    deleted = await executions.prune_history(keep_last=2, batch_size=2)
    assert deleted >= 9
    for execution_id in ids:
        assert [e.seq for e in await entries(executions, execution_id)] == [4, 5]
    assert await executions.prune_history(keep_last=2, batch_size=2) == 0
    remaining = await scalar(
        store, "SELECT count(*) FROM statifier_history WHERE NOT execution_id = ANY(%s)", [ids]
    )
    assert remaining <= others


async def test_retention_stops_after_its_batches_and_by_age(
    executions: Executions, store: AsyncConnectionPool
) -> None:
    execution_id = unique()
    await executions.create(ORDER, execution_id=execution_id)
    for _ in range(5):
        await executions.step(execution_id, Event(name="remind"))
    async with store.connection() as conn:
        await conn.execute(
            "UPDATE statifier_history SET at = at - interval '8 days'"
            " WHERE execution_id = %s AND seq <= 4",
            [execution_id],
        )
    one = await executions.prune_history(older_than=timedelta(days=7), batch_size=1, max_batches=1)
    assert one >= 1
    await executions.prune_history(older_than=timedelta(days=7), batch_size=1)
    assert [e.seq for e in await entries(executions, execution_id)] == [5, 6]
    assert await executions.prune_history(older_than=timedelta(days=7)) == 0
    with pytest.raises(InvalidArgument):
        await executions.prune_history()
    with pytest.raises(InvalidArgument):
        await executions.prune_history(keep_last=-1)


async def test_an_entry_stays_far_below_its_read_bound_whatever_the_chart_does(
    executions: Executions,
) -> None:
    hostile = chart(
        f"""
        <state id="{"s" * 4000}">
          <transition event="go" type="internal">
            <foreach array="list(range(100))" item="i">
              <log label="{"l" * 4000}" expr="'\\x00' * 5000"/>
              <send event="{"e" * 4000}" target="#_internal"/>
              <send id="t" event="{"e" * 4000}" delay="1s"/>
              <raise event="{"r" * 4000}"/>
            </foreach>
          </transition>
        </state>
        """,
    )
    execution_id = unique()
    await executions.create(hostile, execution_id=execution_id)
    await executions.step(execution_id, Event(name="go", data=["\x01" * 100_000]))
    entry = (await entries(executions, execution_id))[1]
    size = len(json.dumps(entry.to_json()).encode())
    assert size < History().max_entry_bytes // 4, size
    assert entry.omitted == 2 * (100 - MAX_ITEMS)  # logs and timers (#_internal is no effect)


def test_history_settings_are_checked() -> None:
    bad: dict[str, Any]
    for bad in ({"enabled": "yes"}, {"max_page_size": 0}, {"max_entry_bytes": True}):
        with pytest.raises(InvalidArgument):
            History(**bad)
    with pytest.raises(InvalidArgument):
        Trigger("cron")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        Executions(None, executor=TableExecutor(), history="on")  # type: ignore[arg-type]


async def test_a_fired_event_to_the_parent_is_no_macrostep_of_its_own(
    store: AsyncConnectionPool, executor: TableExecutor
) -> None:
    relay = chart(
        '<state id="s"><onentry><send event="up" target="#_parent" delay="1s"/></onentry></state>'
    )
    executions = Executions(store, executor=executor, host=OutboxHost(routes=("#_parent",)))
    execution_id = unique()
    await executions.create(relay, execution_id=execution_id)
    [key] = [key for key in executor.timers if key[0] == execution_id]
    fired = await executions.fire(execution_id, executor.timers[key])
    assert isinstance(fired, Stepped)
    assert fired.transition_taken is None
    assert fired.entry is not None
    assert fired.entry.event is not None
    assert (fired.entry.kind, fired.entry.event.name) == ("fired", "up")
    assert fired.entry.transition_taken is None
    assert fired.entry.errors == ()


async def test_the_execution_json_shape_is_pinned(executions: Executions) -> None:
    execution_id = unique()
    created = await executions.create(ORDER, execution_id=execution_id, metadata={"c": 1})
    shape = created.execution.to_json()
    assert list(shape) == [
        "id",
        "status",
        "chart",
        "metadata",
        "parent",
        "failure",
        "outcome",
        "step_count",
        "history_seq",
        "created_at",
        "updated_at",
    ]
    assert shape["chart"] == {"identity": ORDER.identity, "name": "order", "version": None}
    assert (shape["id"], shape["status"], shape["metadata"]) == (execution_id, "active", {"c": 1})
    assert (shape["step_count"], shape["history_seq"]) == (1, 1)
    assert shape["updated_at"].endswith("Z")
    assert created.entry is not None
    assert shape["updated_at"] == created.entry.to_json()["at"]  # one clock, one format
    assert json.loads(json.dumps(shape)) == shape


async def test_a_cancelled_timer_that_fires_anyway_writes_nothing(
    executions: Executions, executor: TableExecutor
) -> None:
    cancelling = chart(
        """
        <state id="a">
          <onentry><send id="t" event="tick" delay="1h"/></onentry>
          <transition event="stop" type="internal"><cancel sendid="t"/></transition>
          <transition event="tick" target="b"/>
        </state>
        <state id="b"/>
        """
    )
    execution_id = unique()
    await executions.create(cancelling, execution_id=execution_id)
    stopped = await executions.step(execution_id, Event(name="stop"))
    assert isinstance(stopped, Stepped)
    assert stopped.entry is not None
    assert stopped.entry.timers_cancelled == ("t",)
    [key] = [key for key in executor.timers if key[0] == execution_id]
    late = await executions.fire(execution_id, executor.timers[key], key="job:7")
    assert isinstance(late, Declined)  # cancel wins: nothing driven, nothing written
    assert [e.kind for e in await entries(executions, execution_id)] == ["created", "event"]
    assert (await executions.get(execution_id)).history_seq == 2


BUSY = chart(
    """
    <datamodel><data id="n" expr="0"/></datamodel>
    <state id="idle">
      <transition event="work" target="working">
        <send event="started" target="#_parent"/>
        <assign location="nowhere.deep" expr="1"/>
      </transition>
    </state>
    <state id="working">
      <invoke id="job" type="test:job"/>
      <transition event="stop" target="idle"/>
    </state>
    """
)


async def test_an_entry_lists_the_sends_invocations_and_errors_of_its_step(
    store: AsyncConnectionPool, executor: TableExecutor
) -> None:
    executions = Executions(store, executor=executor, host=OutboxHost())
    execution_id = unique()
    await executions.create(BUSY, execution_id=execution_id)
    worked = await executions.step(execution_id, Event(name="work"))
    stopped = await executions.step(execution_id, Event(name="stop"))
    assert isinstance(worked, Stepped)
    assert isinstance(stopped, Stepped)
    entry, later = worked.entry, stopped.entry
    assert entry is not None
    assert later is not None
    assert [(s.event, s.target) for s in entry.sends] == [("started", "#_parent")]
    assert [(i.invoke_id, i.type) for i in entry.invocations_started] == [("job", "test:job")]
    assert [(e.name, e.line) for e in entry.errors] == [("error.execution", 6)]
    assert "nowhere" in entry.errors[0].message
    assert (entry.invocations_cancelled, later.invocations_cancelled) == ((), ("job",))
    assert (entry.configuration_before, entry.configuration_after) == (("idle",), ("working",))
    stored = await entries(executions, execution_id)
    assert stored[1:] == [entry, later]
    assert worked.entry == entry  # read again from what the step stored, equal


def test_a_triggered_by_block_puts_the_outer_trigger_back_even_when_it_raises() -> None:
    outer = Trigger("operator", detail="outer")
    inner = Trigger("timer", job_id=7)
    seen: list[Trigger] = []

    def fail_inside() -> None:
        with triggered_by(inner):
            seen.append(current_trigger())
            raise ValueError("inside")

    with triggered_by(outer) as entered:
        assert entered is outer
        with pytest.raises(ValueError, match="inside"):
            fail_inside()
        assert seen == [inner]
        assert current_trigger() is outer
    assert current_trigger() == Trigger()


def test_a_triggered_by_block_is_entered_once() -> None:
    block = triggered_by(Trigger("timer", job_id=7))
    with block:
        pass
    with pytest.raises(RuntimeError, match="entered once"), block:
        pass
    assert current_trigger() == Trigger()


def test_triggered_by_refuses_what_is_not_a_trigger_when_called() -> None:
    with pytest.raises(InvalidArgument, match="trigger must be a Trigger, not 'timer'"):
        triggered_by("timer")  # type: ignore[arg-type]
