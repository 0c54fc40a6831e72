"""The chart registry (any node compiles what an execution runs), the machine cache, listing,
the installer and the limits."""

from __future__ import annotations

import pytest
import statifier
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from statifier.core.events import Event
from statifier_persistence import (
    STATUSES,
    ChartConflict,
    ChartNotRegistered,
    ChartRetired,
    ChartUnusable,
    Executions,
    InvalidArgument,
    InvalidPrefix,
    Limits,
    Stepped,
    install,
    install_sql,
    verify,
)
from statifier_persistence._charts import MachineCache

from persistence_support.common import NS, TableExecutor, chart, unique

WITH_SRC = f"""<scxml {NS} name="with_src" initial="s">
  <datamodel><data id="limits" src="limits.json"/></datamodel>
  <state id="s">
    <transition event="go" cond="limits['n'] == 3" target="ok"/>
    <transition event="go" target="wrong"/>
  </state>
  <final id="ok"/><final id="wrong"/>
</scxml>"""


def compile_with(documents: dict[str, str], version: str) -> statifier.Machine:
    """WITH_SRC compiled as ``version`` with a resolver over ``documents``."""
    return statifier.compile(WITH_SRC, resolver=documents.__getitem__, version=version)


async def test_another_node_compiles_the_chart_from_the_registry(
    store: AsyncConnectionPool, executor: TableExecutor
) -> None:
    machine = compile_with({"limits.json": '{"n": 3}'}, version="7")
    writer = Executions(store, executor=executor)
    execution_id = unique()
    await writer.create(machine, execution_id=execution_id)
    node = Executions(store, executor=executor)  # no machine of its own, no resolver
    stepped = await node.step(execution_id, Event(name="go"))
    assert isinstance(stepped, Stepped)
    assert (
        stepped.state.configuration_ids()[-1:] == ("ok",) or stepped.execution.status == "completed"
    )
    assert stepped.execution.status == "completed"
    assert (stepped.execution.chart_name, stepped.execution.chart_version) == ("with_src", "7")


async def test_a_chart_named_at_compile_time_is_compiled_with_that_name(
    store: AsyncConnectionPool, executor: TableExecutor
) -> None:
    machine = statifier.compile(f'<scxml {NS} name="inner"><state id="s"/></scxml>', name="outer")
    execution_id = unique()
    await Executions(store, executor=executor).create(machine, execution_id=execution_id)
    execution, state = await Executions(store, executor=executor).load(execution_id)
    assert execution.chart_name == "outer"
    assert state.machine.identity == machine.identity


async def test_one_identity_with_other_resolved_documents_conflicts(
    executions: Executions,
) -> None:
    first = compile_with({"limits.json": '{"n": 3}'}, version="conflict")
    second = compile_with({"limits.json": '{"n": 4}'}, version="conflict")
    assert first.identity == second.identity
    await executions.register(first)
    assert await executions.register(first) == first.identity  # idempotent
    with pytest.raises(ChartConflict):
        await executions.create(second, execution_id=unique())


async def test_an_execution_of_an_unregistered_chart_is_refused(
    executions: Executions, store: AsyncConnectionPool
) -> None:
    execution_id = unique()
    machine = statifier.compile(f'<scxml {NS}><state id="s"/></scxml>', version="gone")
    await executions.create(machine, execution_id=execution_id)
    async with store.connection() as conn:
        await conn.execute("SET session_replication_role = replica")  # skip the foreign key
        await conn.execute("DELETE FROM statifier_charts WHERE identity = %s", [machine.identity])
    node = Executions(store, executor=TableExecutor())
    with pytest.raises(ChartNotRegistered):
        await node.step(execution_id, Event(name="x"))


def test_the_machine_cache_is_bounded_and_keeps_the_recently_used() -> None:
    cache = MachineCache(2)
    machines = [chart(f'<state id="s{n}"/>') for n in range(3)]
    cache.put(machines[0])
    cache.put(machines[1])
    assert cache.get(machines[0].identity) is machines[0]  # now the most recent
    cache.put(machines[2])
    assert len(cache) == 2
    assert cache.get(machines[1].identity) is None
    assert cache.get(machines[0].identity) is machines[0]


async def test_list_filters_by_status_chart_and_metadata_and_pages(
    pool: AsyncConnectionPool,
) -> None:
    executions = Executions(pool, executor=TableExecutor())
    door = chart(
        '<state id="s"><transition event="close" target="e"/></state><final id="e"/>', name="door"
    )
    lamp = chart('<state id="s"/>', name="lamp")
    for n in range(5):
        await executions.create(
            door, execution_id=f"door_{n}", metadata={"n": n, "even": n % 2 == 0}
        )
    for n in range(3):
        await executions.create(lamp, execution_id=f"lamp_{n}", metadata={"n": n})
    await executions.step("door_1", Event(name="close"))

    all_ids = [e.id for e in (await executions.list()).executions]
    assert all_ids == sorted(all_ids)
    assert len(all_ids) == 8
    all_ids = sorted([*all_ids, "door_v2"])
    doors = await executions.list(chart="door", status="active")
    assert [e.id for e in doors.executions] == ["door_0", "door_2", "door_3", "door_4"]
    completed = await executions.list(status="completed")
    assert [e.id for e in completed.executions] == ["door_1"]
    even = await executions.list(metadata={"even": True})
    assert [e.id for e in even.executions] == ["door_0", "door_2", "door_4"]
    door_v2 = statifier.compile(door.source, name="door", version="2")
    await executions.create(door_v2, execution_id="door_v2")
    by_revision = await executions.list(revision=door_v2.identity)
    assert [e.id for e in by_revision.executions] == ["door_v2"]
    assert len((await executions.list(revision=door.identity)).executions) == 5
    await executions.step("door_v2", Event(name="close"))

    pages: list[list[str]] = []
    after = None
    while True:
        page = await executions.list(limit=4, after=after)
        pages.append([e.id for e in page.executions])
        if page.after is None:
            break
        after = page.after
    assert [len(p) for p in pages] == [4, 4, 1]
    assert [eid for page_ids in pages for eid in page_ids] == all_ids

    zero = {"needs_migration": 0, "failed": 0, "cancelled": 0}
    assert await executions.counts() == {"active": 7, "completed": 2, **zero}
    assert list(await executions.counts()) == list(STATUSES)
    assert await executions.counts(chart="door") == {"active": 4, "completed": 2, **zero}
    assert await executions.counts(revision=door_v2.identity) == {
        "active": 0, "completed": 1, **zero
    }  # fmt: skip
    assert await executions.counts(metadata={"even": True}) == {
        "active": 3, "completed": 0, **zero
    }  # fmt: skip
    assert (await executions.counts(chart="none"))["active"] == 0


async def test_chart_by_name_is_the_newest_revision_not_retired(
    pool: AsyncConnectionPool,
) -> None:
    executions = Executions(pool, executor=TableExecutor())
    body = '<state id="s"><transition event="go" target="e"/></state><final id="e"/>'
    old = chart(body, name="door")
    new = statifier.compile(old.source, name="door", version="2")
    with pytest.raises(ChartNotRegistered):
        await executions.chart("door")
    await executions.register(old)
    assert (await executions.chart("door")).identity == old.identity
    await executions.register(new)
    latest = await executions.chart("door")
    assert latest.identity == new.identity
    assert latest.states[1].id == "s"
    # A node with an empty cache compiles it from the registry.
    assert (await Executions(pool, executor=TableExecutor()).chart("door")).identity == (
        new.identity
    )
    assert (await executions.chart(old.identity)).identity == old.identity  # by identity
    await executions.retire(new.identity)
    assert (await executions.chart("door")).identity == old.identity
    with pytest.raises(ChartRetired):
        await executions.chart(new.identity)
    for bad in ("", "x" * 2000, 7):
        with pytest.raises(InvalidArgument):
            await executions.chart(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "options",
    [
        {"limit": 0},
        {"limit": 1001},
        {"limit": True},
        {"status": "running"},
        {"after": ""},
        {"revision": "x" * 2000},
        {"revision": 7},
    ],
    ids=["zero", "over", "bool", "status", "after", "long-revision", "int-revision"],
)
async def test_list_arguments_are_bounded(
    executions: Executions, options: dict[str, object]
) -> None:
    with pytest.raises(InvalidArgument):
        await executions.list(**options)  # type: ignore[arg-type]


async def test_metadata_is_bounded_and_must_be_json(executions: Executions) -> None:
    small = Executions(
        executions.pool, executor=TableExecutor(), limits=Limits(max_metadata_bytes=32)
    )
    machine = chart('<state id="s"/>')
    for bad in ({"k": "x" * 40}, {"k": float("nan")}, {1: "int key"}, {"k": "\x00"}, ["list"]):
        with pytest.raises(InvalidArgument):
            await small.create(machine, execution_id=unique(), metadata=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "field",
    [
        "max_position_bytes",
        "max_page_size",
        "max_cached_charts",
        "max_self_sends",
        "max_invoke_depth",
        "max_tree_executions",
        "max_pending_messages",
        "max_posts",
    ],
)
def test_limits_must_be_positive_integers(field: str) -> None:
    for bad in (0, -1, True, 1.5, "10"):
        with pytest.raises(InvalidArgument):
            Limits(**{field: bad})  # type: ignore[arg-type]


async def test_install_is_idempotent_and_works_in_another_schema(
    make_database: object, pg_server: object
) -> None:
    url = make_database("template0")  # type: ignore[operator]
    assert await verify(url) == [
        "statifier_charts",
        "statifier_executions",
        "statifier_step_keys",
        "statifier_fan_outs",
        "statifier_fan_out_children",
        "statifier_history",
        "statifier_watches",
        "statifier_chart_links",
        "statifier_messages",
    ]
    await install(url)
    await install(url)
    assert await verify(url) == []
    await install(url, prefix="durable")
    assert await verify(url, prefix="durable") == []
    async with await AsyncConnection.connect(url, autocommit=True) as conn:
        executions = Executions(executor=TableExecutor(), prefix="durable")
        await conn.execute(
            "CREATE TABLE test_effects (id bigserial, execution_id text, kind text,"
            " send_id text, ordinal int, invoke_id text, detail jsonb,"
            " cancelled boolean DEFAULT false)"
        )
        created = await executions.create(chart('<state id="s"/>'), execution_id="x1", conn=conn)
        assert created.execution.id == "x1"
        cursor = await conn.execute("SELECT count(*) FROM durable.statifier_executions")
        assert await cursor.fetchone() == (1,)
        cursor = await conn.execute("SELECT count(*) FROM public.statifier_executions")
        assert await cursor.fetchone() == (0,)


def test_prefixes_are_plain_identifiers() -> None:
    assert '"select".statifier_executions' in install_sql("select")
    for bad in ("Public", "1x", "a-b", "x" * 64, 'a"b', ""):
        with pytest.raises(InvalidPrefix):
            install_sql(bad)
        with pytest.raises(InvalidPrefix):
            Executions(executor=TableExecutor(), prefix=bad)


def test_an_executor_is_required() -> None:
    with pytest.raises(InvalidArgument):
        Executions(executor=object())  # type: ignore[arg-type]


def _over_limit(amount: int) -> bool:
    return amount > 100


RULES = {"over_limit": _over_limit}

WITH_FUNCTION = f"""<scxml {NS} name="rules" initial="open">
  <state id="open">
    <transition event="charge" cond="over_limit(_event.data)" target="review"/>
    <transition event="charge" target="open"/>
  </state>
  <final id="review"/>
</scxml>"""


def with_function() -> statifier.Machine:
    """WITH_FUNCTION compiled with the host functions it calls."""
    return statifier.compile(WITH_FUNCTION, functions=RULES)


async def test_charts_calling_host_functions_run_on_every_node_given_the_functions(
    store: AsyncConnectionPool,
) -> None:
    # A worker compiles an execution's chart from the registry: with the functions its
    # Executions was given, or not at all. A node without them refuses the chart when it
    # is registered there, and cannot step an execution that calls them.
    machine = with_function()
    creator = Executions(store, executor=TableExecutor(), functions=RULES)
    execution_id = unique()
    await creator.create(machine, execution_id=execution_id)
    worker = Executions(store, executor=TableExecutor(), functions=RULES)
    small = await worker.step(execution_id, Event(name="charge", data=5))
    assert isinstance(small, Stepped)
    assert small.state.active_leaf_ids() == ("open",)
    large = await worker.step(execution_id, Event(name="charge", data=500))
    assert isinstance(large, Stepped)
    assert large.execution.status == "completed"

    bare = Executions(store, executor=TableExecutor())
    with pytest.raises(ChartUnusable, match="over_limit"):
        await bare.create(with_function(), execution_id=unique())
    other = unique()
    await creator.create(machine, execution_id=other)
    with pytest.raises(ChartUnusable, match="over_limit"):
        await bare.step(other, Event(name="charge", data=5))


def test_executions_refuses_host_functions_a_chart_could_not_be_compiled_with(
    store: AsyncConnectionPool,
) -> None:
    with pytest.raises(InvalidArgument, match="shadow"):
        Executions(store, executor=TableExecutor(), functions={"len": len})
