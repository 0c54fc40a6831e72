"""Fan-out on a real queue: one invocation becomes N child start jobs, each starting a child.

Spec 2.11-2.13, acceptance items 28 and 29. Invocations are stored with the real
``_enqueue.enqueue`` and run by a server-mode Oban on PostgreSQL; the handler
(``FanOutFromParams``) fans out over whatever ``params["items"]`` holds, the child starter
and the invoke delivery record what they receive (``oban_support.fanout_seams``). Checks that
need no worker call ``_fan_out.start`` directly and leave the rows pending on a queue nobody
runs.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from statifier_oban._errors import FanOutError, InvalidScope
from statifier_oban._names import CHILD_START_WORKER, INVOKE_WORKER
from statifier_oban.delivery import Snoozed
from statifier_oban.invocations import _enqueue, _fan_out
from statifier_oban.invocations._fan_out import Refused
from statifier_oban.telemetry import (
    EVENT_KEYS,
    INVOKE_CHILD_STARTED,
    INVOKE_DELIVERED,
    INVOKE_FAILED,
    INVOKE_FAN_OUT,
    INVOKE_UNSTARTED_CANCELLED,
)

import oban_support.fanout_seams as seams
from oban_support.common import (
    SETTLED,
    Captured,
    JobRow,
    capture_telemetry,
    database_fixture,
    wait_until,
)
from oban_support.fanout_rig import Rig, make_invoke, parent_args
from oban_support.fanout_seams import Answer, FanOutFromParams, StartCall

fanout_database = database_fixture("fanout_database")


@pytest_asyncio.fixture
async def rig(fanout_database: str) -> AsyncIterator[Rig]:
    """This test's pool, client Oban and (after ``rig.start()``) running queue."""
    built = Rig(fanout_database)
    await built.open()
    try:
        yield built
    finally:
        await built.close()


def items(n: int) -> list[dict[str, int]]:
    """``n`` descriptors, the shape a fan-out should go over (ids, not payloads)."""
    return [{"chunk": i} for i in range(n)]


async def run_fan_out(rig: Rig, scope: str, invoke: Any, **config: Any) -> JobRow:
    """Enqueue ``invoke`` for ``FanOutFromParams`` on the running queue; its settled row."""
    settings = rig.use(rig.config(**config))
    job_id, conflict = await _enqueue.enqueue(settings, FanOutFromParams, scope, invoke)
    assert not conflict
    return await rig.wait_state(job_id, *SETTLED)


def answers(scope: str) -> list[Answer]:
    """What the recording delivery received for ``scope``."""
    return list(seams.ANSWERS.get(scope, []))


def starts(scope: str) -> list[StartCall]:
    """The starter calls of ``scope``, by index then attempt."""
    return sorted(seams.STARTS.get(scope, []), key=lambda c: (c.index, c.attempt or 0))


def assert_keys(seen: Captured, name: str, scope: str) -> list[dict[str, Any]]:
    """The events ``name`` of ``scope``, each checked to carry exactly the documented keys."""
    metas = seen.named(name, scope)
    for meta in metas:
        assert set(meta) == EVENT_KEYS[name], name
    return metas


# --- scheduling: N items, N start jobs --------------------------------------------------------


async def test_n_items_become_n_start_jobs_and_the_fan_out_job_completes_without_answering(
    rig: Rig,
) -> None:
    await rig.start()
    scope = rig.scope()
    invoke = make_invoke(params={"items": items(4), "on": "first_error"})
    with capture_telemetry() as seen:
        parent = await run_fan_out(rig, scope, invoke)
        rows = await rig.wait_rows(scope, "completed", 4)

    assert parent.state == "completed", parent.error_text
    assert parent.args == parent_args(scope, invoke)
    assert [row.index for row in rows] == [0, 1, 2, 3]
    for index, row in enumerate(rows):
        assert row.worker == CHILD_START_WORKER
        assert row.queue == rig.queue
        assert row.args == {
            **parent.args,
            "index": index,
            "child_count": 4,
            "policy": "first_error",
            "item": {"json": f'{{"chunk":{index}}}'},  # each start holds its own item
        }
        assert row.meta == {"child_starter": seams.STARTER_PATH}
    # The invocation stays open: nothing reached the execution, through either door.
    assert answers(scope) == []
    assert seen.named(INVOKE_DELIVERED, scope) == []
    assert seen.named(INVOKE_FAILED, scope) == []
    [event] = assert_keys(seen, INVOKE_FAN_OUT, scope)
    assert event["count"] == 4
    assert event["policy"] == "first_error"
    assert event["queue"] == rig.queue
    assert event["job_id"] == parent.id
    assert event["invoke_id"] == "map"
    assert event["handler"] == seams.HANDLER_PATH
    assert event["caller_context"] == {"trace": "t-1", "tenant": 7}
    assert isinstance(event["system_time"], int)


async def test_start_jobs_carry_the_child_start_timeout_only_when_one_is_set(rig: Rig) -> None:
    unbounded, bounded = rig.scope(), rig.scope()
    invoke = make_invoke()
    config = rig.config(parked=True)
    assert await _fan_out.start(config, parent_args(unbounded, invoke), invoke, items(2)) == 2
    config = rig.config(parked=True, child_start_timeout=1_500)
    assert await _fan_out.start(config, parent_args(bounded, invoke), invoke, items(2)) == 2

    assert [row.meta for row in await rig.rows(unbounded)] == [
        {"child_starter": seams.STARTER_PATH}
    ] * 2
    assert [row.meta for row in await rig.rows(bounded)] == [
        {"child_starter": seams.STARTER_PATH, "timeout": 1_500}
    ] * 2
    assert {row.state for row in await rig.rows(bounded)} == {"available"}
    assert {row.queue for row in await rig.rows(bounded)} == {rig.parked}


async def test_a_start_outliving_the_child_start_timeout_fails_its_attempt(rig: Rig) -> None:
    await rig.start()
    scope = rig.scope()

    async def slow(call: StartCall) -> None:
        await asyncio.sleep(3)

    seams.STARTER_SCRIPTS[scope] = slow
    invoke = make_invoke(params={"items": items(1)})
    with capture_telemetry() as seen:
        await run_fan_out(rig, scope, invoke, child_start_timeout=200)
        [row] = await rig.wait_rows(scope, "retryable", 1)
    assert row.attempt == 1
    assert "timed out" in row.error_text
    assert seams.children_of(scope, "map") == []
    assert seen.named(INVOKE_CHILD_STARTED, scope) == []


# --- replays ------------------------------------------------------------------------------


async def test_running_the_same_fan_out_start_twice_stores_no_duplicates(rig: Rig) -> None:
    scope = rig.scope()
    invoke = make_invoke()
    config = rig.config(parked=True)
    args = parent_args(scope, invoke)

    assert await _fan_out.start(config, args, invoke, items(3)) == 3
    first = await rig.rows(scope)
    assert await _fan_out.start(config, args, invoke, items(3)) == 3
    second = await rig.rows(scope)

    assert [row.index for row in first] == [0, 1, 2]
    assert [row.id for row in second] == [row.id for row in first]


async def test_a_replay_stores_only_the_missing_indices(rig: Rig) -> None:
    scope = rig.scope()
    invoke = make_invoke()
    config = rig.config(parked=True)
    args = parent_args(scope, invoke)
    await _fan_out.start(config, args, invoke, items(3))
    before = {row.index: row.id for row in await rig.rows(scope)}
    await rig.execute("DELETE FROM oban_jobs WHERE id = %s", [before[1]])

    await _fan_out.start(config, args, invoke, items(3))

    after = {row.index: row.id for row in await rig.rows(scope)}
    assert sorted(after) == [0, 1, 2]
    assert after[0] == before[0]
    assert after[2] == before[2]
    assert after[1] != before[1]


async def test_a_later_generation_of_the_invocation_gets_start_jobs_of_its_own(rig: Rig) -> None:
    scope = rig.scope()
    config = rig.config(parked=True)
    first, reentered = make_invoke(macrostep=3), make_invoke(macrostep=9)
    await _fan_out.start(config, parent_args(scope, first), first, items(2))
    await _fan_out.start(config, parent_args(scope, reentered), reentered, items(2))

    rows = await rig.rows(scope)
    assert sorted((row.args["macrostep"], row.index) for row in rows) == [
        (3, 0),
        (3, 1),
        (9, 0),
        (9, 1),
    ]


async def test_a_rerun_fan_out_job_adds_no_start_jobs_and_starts_no_child_twice(
    rig: Rig,
) -> None:
    server = await rig.start()
    scope = rig.scope()
    invoke = make_invoke(params={"items": items(3)})
    parent = await run_fan_out(rig, scope, invoke)
    first = await rig.wait_rows(scope, "completed", 3)

    await server.retry_job(parent.id)  # the at-least-once replay of the whole job

    async def second_run() -> JobRow | None:
        row = await rig.row(parent.id)
        return row if row.attempt == 2 and row.state in SETTLED else None

    rerun: JobRow = await wait_until(second_run, what="the second run of the fan-out job")

    assert rerun.state == "completed", rerun.error_text
    assert [row.id for row in await rig.rows(scope)] == [row.id for row in first]
    assert [call.index for call in starts(scope)] == [0, 1, 2]
    assert seams.children_of(scope, "map") == [0, 1, 2]
    assert answers(scope) == []


# --- the width cap ------------------------------------------------------------------------


async def test_exactly_max_fan_out_items_is_accepted(rig: Rig) -> None:
    await rig.start()
    scope = rig.scope()
    parent = await run_fan_out(rig, scope, make_invoke(params={"items": items(3)}), max_fan_out=3)
    assert parent.state == "completed", parent.error_text
    assert len(await rig.wait_rows(scope, "completed", 3)) == 3
    assert answers(scope) == []


async def test_the_default_cap_is_1000_items(rig: Rig) -> None:
    accepted, refused = rig.scope(), rig.scope()
    invoke = make_invoke()
    config = rig.config(parked=True)
    assert config.max_fan_out == 1_000

    assert (
        await _fan_out.start(config, parent_args(accepted, invoke), invoke, items(1_000)) == 1_000
    )
    verdict = await _fan_out.start(config, parent_args(refused, invoke), invoke, items(1_001))

    assert verdict == Refused("cap_exceeded", 1_001, 1_000)
    assert len(await rig.rows(accepted)) == 1_000
    assert await rig.rows(refused) == []


async def test_one_item_over_the_cap_fails_the_invocation_and_starts_nothing(rig: Rig) -> None:
    await rig.start()
    scope = rig.scope()
    invoke = make_invoke(params={"items": items(4)})
    with capture_telemetry() as seen:
        parent = await run_fan_out(rig, scope, invoke, max_fan_out=3)

    assert parent.state == "cancelled"
    assert "fan_out_refused" in parent.error_text
    [answer] = answers(scope)
    assert (answer.kind, answer.invoke_id, answer.reason, answer.attempts) == (
        "failed",
        "map",
        "fan_out_refused",
        1,
    )
    assert answer.caller_context == invoke.caller_context
    assert isinstance(answer.detail, str)
    assert re.search(r"\b4\b", answer.detail), answer.detail  # the count
    assert re.search(r"\b3\b", answer.detail), answer.detail  # the cap
    assert await rig.rows(scope) == []
    assert seen.named(INVOKE_FAN_OUT, scope) == []
    [failed] = assert_keys(seen, INVOKE_FAILED, scope)
    assert failed["reason"] == "fan_out_refused"
    assert failed["attempts"] == 1
    assert failed["detail"] == answer.detail
    assert failed["handler"] == seams.HANDLER_PATH
    assert failed["job_id"] == parent.id


# --- items that are not a list, or not storable -------------------------------------------


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        ({1, 2}, "unstorable_item"),
        ({"id": float("nan")}, "unstorable_item"),
        ({"blob": "x" * _fan_out.MAX_ITEM_BYTES}, "item_too_large"),
    ],
    ids=["a-set", "nan", "too-large"],
)
async def test_an_item_that_cannot_be_stored_refuses_the_fan_out_naming_it(
    rig: Rig, item: Any, reason: str
) -> None:
    scope = rig.scope()
    invoke = make_invoke()
    verdict = await _fan_out.start(
        rig.config(parked=True), parent_args(scope, invoke), invoke, [{"id": 0}, item]
    )
    assert isinstance(verdict, Refused)
    assert (verdict.reason, verdict.index) == (reason, 1)
    assert verdict.detail().startswith(f"{reason}: item 1: ")
    assert await rig.rows(scope) == []  # no start for the items before it either


@pytest.mark.parametrize("value", ["abc", {"chunk": 1}, 7, None, True])
async def test_items_that_are_not_a_list_are_refused(rig: Rig, value: Any) -> None:
    scope = rig.scope()
    invoke = make_invoke()
    verdict = await _fan_out.start(
        rig.config(parked=True), parent_args(scope, invoke), invoke, value
    )
    assert verdict == Refused("invalid_items")
    assert await rig.rows(scope) == []


async def test_a_non_list_fails_the_invocation_without_echoing_the_value(rig: Rig) -> None:
    await rig.start()
    scope = rig.scope()
    invoke = make_invoke(params={"items": "chunks-of-the-secret-ledger"})
    with capture_telemetry() as seen:
        parent = await run_fan_out(rig, scope, invoke)

    assert parent.state == "cancelled"
    [answer] = answers(scope)
    assert (answer.kind, answer.reason, answer.attempts) == ("failed", "fan_out_refused", 1)
    assert answer.detail is not None
    assert "invalid_items" in answer.detail
    assert "secret" not in answer.detail
    [failed] = assert_keys(seen, INVOKE_FAILED, scope)
    assert "secret" not in failed["detail"]
    assert await rig.rows(scope) == []


# --- the empty fan-out --------------------------------------------------------------------


async def test_an_empty_list_answers_done_with_an_empty_list_at_once(rig: Rig) -> None:
    await rig.start()
    scope = rig.scope()
    invoke = make_invoke(params={"items": []})
    with capture_telemetry() as seen:
        parent = await run_fan_out(rig, scope, invoke)

    assert parent.state == "completed", parent.error_text
    assert answers(scope) == [Answer("done", "map", data=[], caller_context=invoke.caller_context)]
    assert await rig.rows(scope) == []
    assert seen.named(INVOKE_FAN_OUT, scope) == []
    [delivered] = assert_keys(seen, INVOKE_DELIVERED, scope)
    assert delivered["job_id"] == parent.id


async def test_an_empty_list_is_still_refused_for_a_bad_policy(rig: Rig) -> None:
    scope = rig.scope()
    invoke = make_invoke(params={"items": [], "on": "some"})
    verdict = await _fan_out.start(rig.config(parked=True), parent_args(scope, invoke), invoke, [])
    assert verdict == Refused("invalid_policy")


async def test_an_empty_list_still_needs_a_child_starter(rig: Rig) -> None:
    scope = rig.scope()
    invoke = make_invoke(params={"items": []})
    config = rig.config(parked=True, child_starter=None)
    with pytest.raises(FanOutError, match="child_starter"):
        await _fan_out.start(config, parent_args(scope, invoke), invoke, [])


# --- the aggregation policy ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "policy"),
    [({"on": "first_error"}, "first_error"), ({"on": "all"}, "all"), ({}, "all")],
    ids=["first_error", "all", "absent"],
)
async def test_the_policy_comes_from_the_on_parameter(
    rig: Rig, params: dict[str, Any], policy: str
) -> None:
    scope = rig.scope()
    invoke = make_invoke(params={"items": items(2), **params})
    assert _fan_out.policy_of(invoke) == policy
    await _fan_out.start(rig.config(parked=True), parent_args(scope, invoke), invoke, items(2))
    assert [row.args["policy"] for row in await rig.rows(scope)] == [policy, policy]


@pytest.mark.parametrize("on", ["any", "FIRST_ERROR", "", 1, ["all"]])
async def test_any_other_on_value_refuses_the_fan_out(rig: Rig, on: Any) -> None:
    scope = rig.scope()
    invoke = make_invoke(params={"items": items(2), "on": on})
    verdict = await _fan_out.start(
        rig.config(parked=True), parent_args(scope, invoke), invoke, items(2)
    )
    assert verdict == Refused("invalid_policy")
    assert await rig.rows(scope) == []


async def test_an_invalid_policy_fails_the_invocation_rather_than_defaulting(rig: Rig) -> None:
    await rig.start()
    scope = rig.scope()
    invoke = make_invoke(params={"items": items(2), "on": "most"})
    parent = await run_fan_out(rig, scope, invoke)

    assert parent.state == "cancelled"
    [answer] = answers(scope)
    assert (answer.kind, answer.reason, answer.attempts) == ("failed", "fan_out_refused", 1)
    assert answer.detail is not None
    assert "invalid_policy" in answer.detail
    assert await rig.rows(scope) == []


# --- the max_concurrency hint -------------------------------------------------------------


@pytest.mark.parametrize("hint", [4, 1, None])
async def test_a_valid_max_concurrency_is_accepted_and_ignored(rig: Rig, hint: Any) -> None:
    plain, hinted = rig.scope(), rig.scope()
    invoke = make_invoke()
    config = rig.config(parked=True)
    await _fan_out.start(config, parent_args(plain, invoke), invoke, items(3))
    assert await _fan_out.start(config, parent_args(hinted, invoke), invoke, items(3), hint) == 3

    def shape(rows: list[JobRow]) -> list[tuple[Any, ...]]:
        return [
            (row.queue, row.meta, row.max_attempts, {**row.args, "scope": None}) for row in rows
        ]

    assert shape(await rig.rows(hinted)) == shape(await rig.rows(plain))


@pytest.mark.parametrize("hint", ["four", 0, -1, True, 2.5])
async def test_an_invalid_max_concurrency_is_a_fan_out_error(rig: Rig, hint: Any) -> None:
    scope = rig.scope()
    invoke = make_invoke()
    with pytest.raises(FanOutError, match="max_concurrency"):
        await _fan_out.start(
            rig.config(parked=True), parent_args(scope, invoke), invoke, items(3), hint
        )
    assert await rig.rows(scope) == []


@pytest.mark.parametrize("hint", ["four", 0])
async def test_an_invalid_max_concurrency_makes_the_fan_out_job_retry(rig: Rig, hint: Any) -> None:
    await rig.start()
    scope = rig.scope()
    invoke = make_invoke(params={"items": items(3), "max_concurrency": hint})
    with capture_telemetry() as seen:
        parent = await run_fan_out(rig, scope, invoke)

    assert parent.state == "retryable"
    assert parent.attempt == 1
    assert "max_concurrency" in parent.error_text
    assert await rig.rows(scope) == []
    assert answers(scope) == []
    assert seen.for_scope(scope) == ["statifier_oban.invoke.enqueued"]


# --- configuration the fan-out needs ------------------------------------------------------


async def test_a_fan_out_without_a_child_starter_retries(rig: Rig) -> None:
    await rig.start()
    scope = rig.scope()
    invoke = make_invoke(params={"items": items(3)})
    with capture_telemetry() as seen:
        parent = await run_fan_out(rig, scope, invoke, child_starter=None)

    assert parent.state == "retryable"
    assert "child_starter" in parent.error_text
    assert await rig.rows(scope) == []
    assert answers(scope) == []
    assert seen.named(INVOKE_FAN_OUT, scope) == []
    assert seen.named(INVOKE_FAILED, scope) == []


async def test_a_fan_out_without_an_invoke_queue_is_a_fan_out_error(rig: Rig) -> None:
    scope = rig.scope()
    invoke = make_invoke()
    config = rig.config(invoke_queue=None)
    with pytest.raises(FanOutError, match="invoke_queue"):
        await _fan_out.start(config, parent_args(scope, invoke), invoke, items(2))


# --- child starts -------------------------------------------------------------------------


async def test_each_start_job_calls_the_starter_with_scope_invoke_index_count_and_policy(
    rig: Rig,
) -> None:
    await rig.start()
    scope = rig.scope()
    invoke = make_invoke(params={"items": items(3), "on": "first_error"})
    with capture_telemetry() as seen:
        await run_fan_out(rig, scope, invoke)
        rows = await rig.wait_rows(scope, "completed", 3)

    calls = starts(scope)
    assert [(c.parent_scope, c.index, c.count, c.opts) for c in calls] == [
        (scope, i, 3, {"policy": "first_error", "item": {"chunk": i}}) for i in range(3)
    ]
    for call, row in zip(calls, rows, strict=True):
        assert call.invoke == invoke  # decoded from the row, equal to the planned effect
        assert call.job_id == row.id
    assert seams.children_of(scope, "map") == [0, 1, 2]

    started = assert_keys(seen, INVOKE_CHILD_STARTED, scope)
    assert sorted(
        (e["index"], e["count"], e["attempt"], e["job_id"], e["invoke_id"]) for e in started
    ) == [(row.index, 3, 1, row.id, "map") for row in rows]
    assert {repr(e["caller_context"]) for e in started} == {repr(invoke.caller_context)}
    assert answers(scope) == []  # a child start is not an answer


async def test_a_plain_function_starter_is_called_too(rig: Rig) -> None:
    await rig.start()
    scope = rig.scope()
    invoke = make_invoke()
    config = rig.config(child_starter=seams.SYNC_STARTER_PATH)
    await _fan_out.start(config, parent_args(scope, invoke), invoke, items(2))

    rows = await rig.wait_rows(scope, "completed", 2)
    assert {row.meta["child_starter"] for row in rows} == {seams.SYNC_STARTER_PATH}
    assert [(c.index, c.opts) for c in starts(scope)] == [
        (0, {"policy": "all", "item": {"chunk": 0}}),
        (1, {"policy": "all", "item": {"chunk": 1}}),
    ]


async def test_a_starter_that_raises_makes_its_start_job_retry_without_child_started(
    rig: Rig,
) -> None:
    await rig.start()
    scope = rig.scope()

    def flaky(call: StartCall) -> None:
        if call.index == 1:
            raise RuntimeError("the child store is down")

    seams.STARTER_SCRIPTS[scope] = flaky
    with capture_telemetry() as seen:
        await run_fan_out(rig, scope, make_invoke(params={"items": items(3)}))
        rows = await wait_until(
            lambda: _settled_rows(rig, scope, 3), what="three settled start jobs"
        )

    by_index = {row.index: row for row in rows}
    assert by_index[0].state == by_index[2].state == "completed"
    assert by_index[1].state == "retryable"
    assert by_index[1].attempt == 1
    assert "the child store is down" in by_index[1].error_text
    assert seams.children_of(scope, "map") == [0, 2]
    assert sorted(e["index"] for e in seen.named(INVOKE_CHILD_STARTED, scope)) == [0, 2]


async def test_a_starter_that_answers_snoozed_snoozes_its_start_keeping_the_attempt(
    rig: Rig,
) -> None:
    # What ExecutionChildStarter answers for a parked parent; a wait that is not a
    # positive number of seconds is the starter's error, and the job retries.
    await rig.start()
    scope = rig.scope()

    def waiting(call: StartCall) -> Snoozed | None:
        return {0: Snoozed(3600), 1: Snoozed(0)}.get(call.index)

    seams.STARTER_SCRIPTS[scope] = waiting
    await run_fan_out(rig, scope, make_invoke(params={"items": items(3)}))
    rows = await wait_until(
        lambda: _rows_past_their_first_run(rig, scope, 3), what="three start jobs run once"
    )

    by_index = {row.index: row for row in rows}
    assert (by_index[0].state, by_index[0].attempt) == ("scheduled", 0)
    assert by_index[1].state == "retryable"
    assert "not Snoozed(n>0)" in by_index[1].error_text
    assert by_index[2].state == "completed"
    assert seams.children_of(scope, "map") == [2]


async def _rows_past_their_first_run(rig: Rig, scope: str, count: int) -> list[JobRow] | None:
    rows = await rig.rows(scope)
    started = len(seams.STARTS[scope]) >= count
    # A snoozed start is scheduled again; every other one has settled.
    if len(rows) == count and started and all(row.state in (*SETTLED, "scheduled") for row in rows):
        return rows
    return None


async def _settled_rows(rig: Rig, scope: str, count: int) -> list[JobRow] | None:
    rows = await rig.rows(scope)
    if len(rows) == count and all(row.state in SETTLED for row in rows):
        return rows
    return None


def child_args(scope: str, **changes: Any) -> dict[str, Any]:
    """Args of a well-formed single-child start job for ``scope``, with ``changes``."""
    args = {**parent_args(scope, make_invoke()), "index": 0, "child_count": 1, "policy": "all"}
    args.update(changes)
    return {key: value for key, value in args.items() if value is not DROP}


DROP: Any = object()


@pytest.mark.parametrize(
    "meta",
    [
        {},
        {"child_starter": "oban_support.fanout_seams:NoSuchStarter"},
        {"child_starter": "no_such_module_for_fan_out:Starter"},
        {"child_starter": seams.NOT_A_STARTER_PATH},
        {"child_starter": "not a path"},
        {"child_starter": 42},
    ],
    ids=["missing", "unknown-attribute", "unknown-module", "no-start_child", "not-a-path", "int"],
)
async def test_a_start_job_whose_starter_does_not_resolve_is_cancelled_at_once(
    rig: Rig, meta: dict[str, Any]
) -> None:
    await rig.start()
    scope = rig.scope()
    with capture_telemetry() as seen:
        job_id = await rig.insert_row(args=child_args(scope), meta=meta)
        row = await rig.wait_state(job_id, *SETTLED)

    assert row.state == "cancelled", row.error_text
    assert "refused: " in row.error_text
    assert row.attempt == 1
    assert starts(scope) == []
    assert seen.named(INVOKE_CHILD_STARTED, scope) == []


@pytest.mark.parametrize(
    "changes",
    [
        {"index": DROP},
        {"index": -1},
        {"index": "0"},
        {"index": None},
        {"index": 1},
        {"child_count": DROP},
        {"child_count": 0},
        {"policy": "any"},
        {"policy": None},
        {"invoke_id": DROP},
        {"item": "not a stored form"},
        {"item": {"json": "{not json"}},
    ],
    ids=[
        "no-index",
        "negative-index",
        "string-index",
        "null-index",
        "index-equals-count",
        "no-count",
        "zero-count",
        "unknown-policy",
        "null-policy",
        "no-invoke-id",
        "item-not-stored-form",
        "item-not-json",
    ],
)
async def test_a_start_job_with_an_invalid_position_or_policy_is_cancelled_as_undecodable(
    rig: Rig, changes: dict[str, Any]
) -> None:
    await rig.start()
    scope = rig.scope()
    with capture_telemetry() as seen:
        job_id = await rig.insert_row(
            args=child_args(scope, **changes), meta={"child_starter": seams.STARTER_PATH}
        )
        row = await rig.wait_state(job_id, *SETTLED)

    assert row.state == "cancelled", row.error_text
    assert "undecodable" in row.error_text
    assert starts(scope) == []
    assert answers(scope) == []
    assert seen.for_scope(scope) == []


async def test_a_start_job_whose_params_codec_is_not_registered_is_cancelled_at_once(
    rig: Rig,
) -> None:
    # A row never chooses what a worker imports: an unregistered codec makes it undecodable.
    await rig.start()
    scope = rig.scope()
    params = {"codec": "no_such_codec_module_for_fan_out:Codec", "b64": "e30="}
    job_id = await rig.insert_row(
        args=child_args(scope, params=params), meta={"child_starter": seams.STARTER_PATH}
    )
    row = await rig.wait_state(job_id, *SETTLED)
    assert row.state == "cancelled", row.error_text
    assert "undecodable" in row.error_text
    assert "no_such_codec_module_for_fan_out" in row.error_text
    assert starts(scope) == []


async def test_a_start_job_without_a_policy_starts_its_child_under_all(rig: Rig) -> None:
    await rig.start()
    scope = rig.scope()
    job_id = await rig.insert_row(
        args=child_args(scope, policy=DROP), meta={"child_starter": seams.STARTER_PATH}
    )
    row = await rig.wait_state(job_id, *SETTLED)
    assert row.state == "completed", row.error_text
    assert [(c.index, c.count, c.opts) for c in starts(scope)] == [(0, 1, {"policy": "all"})]


# --- cancelling the starts that have not run ----------------------------------------------


async def test_cancel_unstarted_cancels_only_the_pending_starts_of_that_invocation(
    rig: Rig,
) -> None:
    await rig.start(limit=1)  # one start at a time, in index order
    scope, elsewhere = rig.scope(), rig.scope("other_parent")
    entered, release = asyncio.Event(), asyncio.Event()

    async def hold_index_2(call: StartCall) -> None:
        if call.index == 2:
            entered.set()
            await release.wait()

    seams.STARTER_SCRIPTS[scope] = hold_index_2
    invoke, other = make_invoke(), make_invoke(invoke_id="other_map")
    parked = rig.config(parked=True)
    # Pending neighbours that must survive: another invocation of the same scope, the same
    # invoke id in another scope, and the invocation's own job (not a child start).
    await _fan_out.start(parked, parent_args(scope, other), other, items(2))
    await _fan_out.start(parked, parent_args(elsewhere, invoke), invoke, items(2))
    invocation_job, _ = await _enqueue.enqueue(parked, FanOutFromParams, scope, invoke)

    running = rig.config()
    await _fan_out.start(running, parent_args(scope, invoke), invoke, items(5))
    await asyncio.wait_for(entered.wait(), 5)
    rows = {row.index: row for row in await rig.rows(scope) if row.args["invoke_id"] == "map"}
    # Cover every pending state: 3 stays available, 4 waits for a retry.
    await rig.execute(
        "UPDATE oban_jobs SET state = 'retryable', "
        "scheduled_at = timezone('UTC', now()) + interval '1 hour' WHERE id = %s",
        [rows[4].id],
    )
    assert [(await rig.row(rows[i].id)).state for i in range(5)] == [
        "completed",
        "completed",
        "executing",
        "available",
        "retryable",
    ]

    with capture_telemetry() as seen:
        count = await _fan_out.cancel_unstarted(running, scope, "map")

    assert count == 2
    states = [(await rig.row(rows[i].id)).state for i in range(5)]
    assert states == ["completed", "completed", "executing", "cancelled", "cancelled"]
    assert "unstarted" in (await rig.row(rows[3].id)).error_text
    release.set()
    assert (await rig.wait_state(rows[2].id, *SETTLED)).state == "completed"
    assert [c.index for c in starts(scope)] == [0, 1, 2]

    neighbours = [row for row in await rig.rows(scope) if row.args["invoke_id"] == "other_map"]
    assert [row.state for row in neighbours] == ["available", "available"]
    assert [row.state for row in await rig.rows(elsewhere)] == ["available", "available"]
    assert (await rig.row(invocation_job)).state == "available"
    assert (await rig.row(invocation_job)).worker == INVOKE_WORKER

    [event] = seen.named(INVOKE_UNSTARTED_CANCELLED)
    assert set(event) == EVENT_KEYS[INVOKE_UNSTARTED_CANCELLED]
    assert (event["count"], event["scope"], event["invoke_id"]) == (2, scope, "map")


async def test_cancel_unstarted_reaches_a_scheduled_start(rig: Rig) -> None:
    scope = rig.scope()
    invoke = make_invoke()
    config = rig.config(parked=True)
    await _fan_out.start(config, parent_args(scope, invoke), invoke, items(2))
    first = (await rig.rows(scope))[0]
    await rig.execute(
        "UPDATE oban_jobs SET state = 'scheduled', "
        "scheduled_at = timezone('UTC', now()) + interval '1 hour' WHERE id = %s",
        [first.id],
    )
    assert await _fan_out.cancel_unstarted(config, scope, "map") == 2
    assert [row.state for row in await rig.rows(scope)] == ["cancelled", "cancelled"]


async def test_cancel_unstarted_leaves_a_suspended_start_alone(rig: Rig) -> None:
    # A recorded deviation from the reference (spec 2.2, acceptance item 9), ADR-0005:
    # ``suspended`` is not among the states a cancel reaches (``names.PENDING_STATES``),
    # because oban-py's open-source engine never sets it. This pins that decision.
    scope = rig.scope()
    invoke = make_invoke()
    config = rig.config(parked=True)
    await _fan_out.start(config, parent_args(scope, invoke), invoke, items(2))
    first = (await rig.rows(scope))[0]
    await rig.execute("UPDATE oban_jobs SET state = 'suspended' WHERE id = %s", [first.id])

    assert await _fan_out.cancel_unstarted(config, scope, "map") == 1
    assert [row.state for row in await rig.rows(scope)] == ["suspended", "cancelled"]


async def test_cancel_unstarted_with_nothing_pending_answers_zero_and_says_so(rig: Rig) -> None:
    scope = rig.scope()
    config = rig.config(parked=True)
    with capture_telemetry() as seen:
        assert await _fan_out.cancel_unstarted(config, scope, "map") == 0
    [event] = seen.named(INVOKE_UNSTARTED_CANCELLED, scope)
    assert set(event) == EVENT_KEYS[INVOKE_UNSTARTED_CANCELLED]
    assert event["count"] == 0


@pytest.mark.parametrize("scope", ["", None])
async def test_cancel_unstarted_needs_a_scope(rig: Rig, scope: Any) -> None:
    with capture_telemetry() as seen, pytest.raises(InvalidScope):
        await _fan_out.cancel_unstarted(rig.config(parked=True), scope, "map")
    assert seen.named(INVOKE_UNSTARTED_CANCELLED) == []
