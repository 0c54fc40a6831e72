"""Chart revisions: a new revision beside the old, migrating executions one at a time and
in bulk, parking them, and charts registered under the identity of their source bytes."""

from __future__ import annotations

import json
import zlib

import pytest
import statifier
from psycopg_pool import AsyncConnectionPool
from statifier.core import planner, position
from statifier.core.events import Event
from statifier_persistence import (
    ChartNotRegistered,
    ExecutionNotFound,
    Executions,
    InvalidArgument,
    MigrationRefused,
    NeedsMigration,
    Stepped,
)

from persistence_support.common import NS, TableExecutor, effect_rows, scalar, unique

HOLD = f"""<scxml {NS} name="hold" initial="on_hold">
  <datamodel><data id="reminders" expr="0"/></datamodel>
  <state id="on_hold">
    <onentry><send id="expiry" event="pickup.expired" delay="3d"/></onentry>
    <onexit><cancel sendid="expiry"/></onexit>
    <transition event="remind" type="internal">
      <assign location="reminders" expr="reminders + 1"/>
    </transition>
    <transition event="pickup.expired" target="expired"/>
    <transition event="picked" target="lent"/>
    <transition event="review" target="reviewing"/>
  </state>
  <state id="reviewing"><transition event="ok" target="lent"/></state>
  <final id="expired"/>
  <final id="lent"/>
</scxml>"""


def revision(source: str, version: str, **renames: str) -> statifier.Machine:
    """``source`` with every ``"old"`` id renamed, as revision ``version``."""
    for old, new in renames.items():
        source = source.replace(f'"{old}"', f'"{new}"')
    return statifier.compile(source, version=version)


def revisions(**renames: str) -> tuple[statifier.Machine, statifier.Machine]:
    """A fresh first revision of HOLD and a second one with ``renames`` (unique versions)."""
    version = unique("v")
    return revision(HOLD, version), revision(HOLD, version + ".2", **renames)


async def stored(store: AsyncConnectionPool, execution_id: str) -> tuple[str, bytes, int]:
    """``(chart_identity, position, step_count)`` as stored."""
    async with store.connection() as conn:
        cursor = await conn.execute(
            "SELECT chart_identity, position, step_count FROM statifier_executions WHERE id = %s",
            [execution_id],
        )
        row = await cursor.fetchone()
    assert row is not None
    return row[0], bytes(row[1]), row[2]


async def test_a_new_revision_is_registered_beside_the_old_one(executions: Executions) -> None:
    v1, v2 = revisions(on_hold="held")
    await executions.create(v1, execution_id=unique())
    await executions.register(v2)
    listed = {r.identity: r for r in await executions.revisions(name="hold", limit=1000)}
    assert {v1.identity, v2.identity} <= set(listed)
    assert listed[v1.identity].executions == {"active": 1}
    assert listed[v2.identity].executions == {}
    assert listed[v2.identity].source_identity == v2.source_identity
    assert listed[v2.identity].retired_at is None
    assert (await executions.revision(v1.identity)).version == v1.version


async def test_a_cosmetic_edit_is_the_same_revision(
    executions: Executions, executor: TableExecutor
) -> None:
    v1, _ = revisions()
    execution_id = unique()
    await executions.create(v1, execution_id=execution_id)
    edited = statifier.compile(
        HOLD.replace("\n", "\r\n  ").replace("<state", "<!-- note -->\n<state"), version=v1.version
    )
    assert edited.source != v1.source
    assert await executions.register(edited) == v1.identity
    again = await executions.create(edited, execution_id=unique())
    assert again.execution.chart_identity == v1.identity
    assert isinstance(await executions.step(execution_id, Event(name="remind")), Stepped)


async def test_a_renamed_state_migrates_and_its_timer_still_fires_into_it(
    executions: Executions, executor: TableExecutor, store: AsyncConnectionPool
) -> None:
    v1, v2 = revisions(on_hold="held")
    execution_id = unique()
    await executions.create(v1, execution_id=execution_id)
    await executions.step(execution_id, Event(name="remind"))
    timers_before = await effect_rows(store, execution_id)
    _, _, steps_before = await stored(store, execution_id)

    migrated = await executions.migrate(execution_id, v2, state_map={"on_hold": "held"})
    assert migrated.from_identity == v1.identity
    assert migrated.execution.chart_identity == v2.identity
    assert migrated.execution.chart_version == v2.version
    assert migrated.execution.step_count == steps_before + 1
    assert migrated.state.active_leaf_ids() == ("held",)
    assert await effect_rows(store, execution_id) == timers_before  # the timer was not touched
    identity, _, _ = await stored(store, execution_id)
    assert identity == v2.identity

    # the timer armed by revision 1 fires into the migrated execution: same scope, same key
    fired = planner.sent_event(execution_id, executor.timers[(execution_id, 1)])
    stepped = await executions.step(execution_id, fired, key="job:1")
    assert isinstance(stepped, Stepped)
    assert stepped.execution.status == "completed"
    assert stepped.execution.outcome is not None
    assert stepped.execution.outcome["configuration"] == ["expired"]
    assert stepped.state.datamodel["reminders"] == 1


async def test_a_state_that_is_gone_refuses_and_nothing_changes(
    executions: Executions, store: AsyncConnectionPool
) -> None:
    v1, v2 = revisions(on_hold="held")
    execution_id = unique()
    await executions.create(v1, execution_id=execution_id)
    before = await stored(store, execution_id)
    with pytest.raises(MigrationRefused) as caught:
        await executions.migrate(execution_id, v2)
    assert isinstance(caught.value.__cause__, position.UnknownStates)
    assert caught.value.__cause__.state_ids == ("on_hold",)
    assert "on_hold" in caught.value.reason
    assert await stored(store, execution_id) == before
    with pytest.raises(MigrationRefused, match="no longer in the chart"):
        await executions.migrate(execution_id, v2, state_map={"on_hold": "nowhere"})
    assert await stored(store, execution_id) == before


async def test_datamodel_changes_migrate_with_the_position(executions: Executions) -> None:
    v1, _ = revisions()
    v2 = statifier.compile(
        HOLD.replace('<data id="reminders" expr="0"/>', '<data id="reminders" expr="0"/>'
                     '<data id="branch"/>'),
        version=f"{v1.version}.b",
    )  # fmt: skip
    execution_id = unique()
    await executions.create(v1, execution_id=execution_id)
    with pytest.raises(MigrationRefused, match="branch"):
        await executions.migrate(execution_id, v2)
    migrated = await executions.migrate(execution_id, v2, datamodel={"branch": "north"})
    _, state = await executions.load(execution_id)
    assert state.datamodel["branch"] == "north" == migrated.state.datamodel["branch"]


async def test_a_dry_run_checks_everything_and_changes_nothing(
    executions: Executions, store: AsyncConnectionPool
) -> None:
    v1, v2 = revisions(on_hold="held")
    execution_id = unique()
    await executions.create(v1, execution_id=execution_id)
    before = await stored(store, execution_id)
    dry = await executions.migrate(execution_id, v2, state_map={"on_hold": "held"}, dry_run=True)
    assert dry.dry_run
    assert dry.state.active_leaf_ids() == ("held",)
    assert dry.execution.chart_identity == v1.identity
    assert await stored(store, execution_id) == before
    with pytest.raises(ChartNotRegistered):  # the target was registered only in the dry run
        await executions.revision(v2.identity)
    with pytest.raises(MigrationRefused):
        await executions.migrate(execution_id, v2, dry_run=True)


async def test_a_migration_by_identity_uses_the_registered_revision(
    executions: Executions,
) -> None:
    v1, v2 = revisions(on_hold="held")
    execution_id = unique()
    await executions.create(v1, execution_id=execution_id)
    with pytest.raises(ChartNotRegistered):
        await executions.migrate(execution_id, v2.identity, state_map={"on_hold": "held"})
    await executions.register(v2)
    fresh = Executions(executions.pool, executor=TableExecutor())  # compiles from the registry
    migrated = await fresh.migrate(execution_id, v2.identity, state_map={"on_hold": "held"})
    assert migrated.execution.chart_identity == v2.identity


async def test_finished_and_unknown_executions_do_not_migrate(executions: Executions) -> None:
    v1, v2 = revisions()
    execution_id = unique()
    await executions.create(v1, execution_id=execution_id)
    await executions.step(execution_id, Event(name="picked"))
    with pytest.raises(MigrationRefused, match="it is completed"):
        await executions.migrate(execution_id, v2)
    with pytest.raises(ExecutionNotFound):
        await executions.migrate(unique(), v2)


async def test_a_parked_execution_migrates_and_stays_parked(executions: Executions) -> None:
    v1, v2 = revisions(on_hold="held")
    execution_id = unique()
    await executions.create(v1, execution_id=execution_id)
    await executions.park(execution_id)
    migrated = await executions.migrate(execution_id, v2, state_map={"on_hold": "held"})
    assert migrated.execution.status == "needs_migration"
    with pytest.raises(NeedsMigration):
        await executions.step(execution_id, Event(name="remind"))
    await executions.unpark(execution_id)
    assert isinstance(await executions.step(execution_id, Event(name="remind")), Stepped)


async def test_migrate_all_moves_a_page_and_lists_what_it_refused(
    executions: Executions,
) -> None:
    v1, _ = revisions()
    v2 = revision(HOLD, f"{v1.version}.2", on_hold="held", reviewing="checking")
    ids = sorted(unique() for _ in range(5))
    for execution_id in ids:
        await executions.create(v1, execution_id=execution_id)
    await executions.step(ids[0], Event(name="picked"))  # finished: not listed
    await executions.park(ids[1])  # parked: migrates too
    await executions.step(ids[2], Event(name="review"))  # 'reviewing' is not mapped
    state_map = {"on_hold": "held"}
    moving = (ids[1], ids[3], ids[4])

    dry = await executions.migrate_all(v1.identity, v2, state_map=state_map, dry_run=True)
    assert dry.dry_run
    assert dry.done == moving
    assert [(i, "reviewing" in why) for i, why in dry.refused] == [(ids[2], True)]
    assert (await executions.revision(v1.identity)).executions["active"] == 3

    first = await executions.migrate_all(v1.identity, v2, state_map=state_map, limit=2)
    assert (first.done, first.after) == ((ids[1],), ids[2])
    assert [i for i, _ in first.refused] == [ids[2]]
    rest = await executions.migrate_all(
        v1.identity, v2.identity, state_map=state_map, after=first.after
    )
    assert (rest.done, rest.refused, rest.after) == ((ids[3], ids[4]), (), None)
    counts = (await executions.revision(v2.identity)).executions
    assert counts == {"active": 2, "needs_migration": 1}
    assert (await executions.revision(v1.identity)).executions == {"active": 1, "completed": 1}


async def test_bulk_park_and_unpark(executions: Executions) -> None:
    v1, _ = revisions()
    ids = sorted(unique() for _ in range(3))
    for execution_id in ids:
        await executions.create(v1, execution_id=execution_id)
    await executions.step(ids[0], Event(name="picked"))
    dry = await executions.park_all(v1.identity, dry_run=True)
    assert dry.done == tuple(ids[1:])
    assert dry.refused == ()
    assert (await executions.revision(v1.identity)).executions == {"active": 2, "completed": 1}
    parked = await executions.park_all(v1.identity)
    assert parked.done == tuple(ids[1:])
    assert (await executions.get(ids[1])).status == "needs_migration"
    assert (await executions.park_all(v1.identity)).done == ()
    unparked = await executions.unpark_all(v1.identity)
    assert unparked.done == tuple(ids[1:])
    assert (await executions.revision(v1.identity)).executions == {"active": 2, "completed": 1}


# -- charts and positions under the identity of their source bytes ----------------------------


async def legacy_execution(
    store: AsyncConnectionPool, machine: statifier.Machine, execution_id: str
) -> None:
    """An execution as the release before canonical identities stored it: its chart row
    and its position under the identity of the source bytes."""
    legacy = machine.source_identity
    state, _ = statifier.initialize(machine, session_id=execution_id)
    head, body = position.dumps(state).split(b"\n", 4)[:3], position.dumps(state).split(b"\n", 4)[4]
    head[2] = json.dumps(legacy).encode()
    # The current format under the old identity (its plain digest: CRC-32 since format 4).
    blob = b"\n".join([*head, b"crc32:%08x" % zlib.crc32(body), body])
    async with store.connection() as conn:
        await conn.execute(
            "INSERT INTO statifier_charts (identity, name, version, source)"
            " VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
            [legacy, machine.name, machine.version, machine.source],
        )
        await conn.execute(
            "INSERT INTO statifier_executions (id, chart_identity, chart_name, chart_version,"
            " position) VALUES (%s, %s, %s, %s, %s)",
            [execution_id, legacy, machine.name, machine.version, blob],
        )


async def test_executions_under_the_source_identity_keep_running(
    executions: Executions, store: AsyncConnectionPool, executor: TableExecutor
) -> None:
    machine = revision(HOLD, unique("v"))
    execution_id = unique()
    await legacy_execution(store, machine, execution_id)
    node = Executions(store, executor=executor)  # compiles the legacy row from the registry
    stepped = await node.step(execution_id, Event(name="remind"))
    assert isinstance(stepped, Stepped)
    identity, blob, _ = await stored(store, execution_id)
    assert identity == machine.source_identity  # the row still names the old identity...
    assert json.loads(blob.split(b"\n")[2]) == machine.identity  # ...the position the new
    stepped = await node.step(execution_id, Event(name="remind"))
    assert isinstance(stepped, Stepped)
    assert stepped.state.datamodel["reminders"] == 2


async def test_the_registry_finds_a_chart_by_either_identity(
    executions: Executions, store: AsyncConnectionPool
) -> None:
    machine = revision(HOLD, unique("v"))
    execution_id = unique()
    await legacy_execution(store, machine, execution_id)
    old = await executions.revision(machine.source_identity)
    assert old.identity == machine.source_identity
    assert old.source_identity is None
    with pytest.raises(ChartNotRegistered):
        await executions.revision(machine.identity)
    # registering the same chart now adds its canonical row, found by either identity
    created = await executions.create(machine, execution_id=unique())
    assert created.execution.chart_identity == machine.identity
    new = await executions.revision(machine.identity)
    assert new.source_identity == machine.source_identity
    assert (await executions.revision(machine.source_identity)).identity == old.identity
    # one migration moves the old executions onto the canonical row; the old one retires
    moved = await executions.migrate_all(machine.source_identity, machine.identity)
    assert moved.done == (execution_id,)
    assert (await stored(store, execution_id))[0] == machine.identity
    retired = await executions.retire(machine.source_identity)
    assert retired.retired_at is not None
    assert (
        await scalar(
            store, "SELECT count(*) FROM statifier_charts WHERE identity = %s", [old.identity]
        )
        == 1
    )


async def test_bulk_calls_on_the_ids_given(executions: Executions) -> None:
    v1, v2 = revisions(on_hold="held")
    known = unique()
    await executions.create(v1, execution_id=known)
    ghost = unique()
    dry = await executions.park_many([known, ghost], dry_run=True)
    assert dry.done == (known,)
    assert [i for i, _ in dry.refused] == [ghost]
    assert (await executions.get(known)).status == "active"
    assert (await executions.park_many([known])).done == (known,)
    refused = await executions.park_many([known])
    assert "cannot become needs_migration" in refused.refused[0][1]
    moved = await executions.migrate_many([known, ghost], v2, state_map={"on_hold": "held"})
    assert moved.done == (known,)
    assert moved.refused == ((ghost, f"no execution {ghost!r}"),)
    assert (await executions.unpark_many([known])).done == (known,)
    with pytest.raises(InvalidArgument, match="at most"):
        await executions.park_many(["x"] * 10_001)
    with pytest.raises(InvalidArgument, match="sequence"):
        await executions.park_many(known)


async def test_a_migration_onto_a_row_of_the_old_identity_keeps_that_row(
    executions: Executions, store: AsyncConnectionPool
) -> None:
    machine = revision(HOLD, unique("v"))
    await legacy_execution(store, machine, unique())
    other, _ = revisions()
    execution_id = unique()
    await executions.create(other, execution_id=execution_id)
    migrated = await executions.migrate(execution_id, machine.source_identity)
    assert migrated.execution.chart_identity == machine.source_identity  # the row that exists
    stepped = await executions.step(execution_id, Event(name="remind"))
    assert isinstance(stepped, Stepped)
