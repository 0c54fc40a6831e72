"""Retiring a chart revision: every pin source is asked, any count or failure refuses."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import statifier
from psycopg_pool import AsyncConnectionPool
from statifier.core.events import Event
from statifier_persistence import (
    ChartRetired,
    ExecutionPins,
    Executions,
    InvalidArgument,
    PinSource,
    RetirementRefused,
)
from statifier_persistence import _revisions as revisions_module

from persistence_support.common import NS, blocked_by, unique

CHART = f"""<scxml {NS} name="loan">
  <state id="lent">
    <transition event="returned" target="back"/>
  </state>
  <final id="back"/>
</scxml>"""


def fresh_revision() -> statifier.Machine:
    """A revision no other test uses."""
    return statifier.compile(CHART, version=unique("v"))


class Counting:
    """A pin source answering ``answer`` and remembering every page it was asked about."""

    def __init__(self, answer: Any = None, name: str = "counting") -> None:
        self.answer = answer
        self.name = name
        self.pages: list[list[str]] = []

    async def pins(self, chart_identity: str, execution_ids: Sequence[str]) -> Mapping[str, int]:
        """See the class docstring (``{"things": 0}`` by default)."""
        self.pages.append(list(execution_ids))
        return {"things": 0} if self.answer is None else self.answer


class Raising:
    """A pin source that cannot count."""

    async def pins(self, chart_identity: str, execution_ids: Sequence[str]) -> Mapping[str, int]:
        """Raises, as a source whose store is down does."""
        raise ConnectionError("the timer store is down")


async def test_an_unfinished_execution_pins_its_revision(executions: Executions) -> None:
    machine = fresh_revision()
    execution_id = unique()
    await executions.create(machine, execution_id=execution_id)
    with pytest.raises(RetirementRefused) as caught:
        await executions.retire(machine.identity)
    report = caught.value.pins
    assert report.counts == {
        "executions": {"active": 1, "needs_migration": 0},
        "fan_outs": {"open": 0},
        "invoked_by": {"revisions": 0},
    }
    assert "executions: active=1" in str(caught.value)
    assert (await executions.revision(machine.identity)).retired_at is None
    await executions.park(execution_id)
    with pytest.raises(RetirementRefused, match="needs_migration=1"):
        await executions.retire(machine.identity)
    await executions.unpark(execution_id)
    await executions.step(execution_id, Event(name="returned"))
    retired = await executions.retire(machine.identity)
    assert retired.retired_at is not None
    assert retired.executions == {"completed": 1}


async def test_a_retired_revision_takes_no_new_execution_and_no_migration(
    executions: Executions,
) -> None:
    machine = fresh_revision()
    await executions.register(machine)
    await executions.retire(machine.identity)
    with pytest.raises(ChartRetired):
        await executions.create(machine, execution_id=unique())
    with pytest.raises(ChartRetired):
        await executions.register(machine)
    other = fresh_revision()
    execution_id = unique()
    await executions.create(other, execution_id=execution_id)
    with pytest.raises(ChartRetired):
        await executions.migrate(execution_id, machine)
    with pytest.raises(ChartRetired):
        await executions.migrate(execution_id, machine.identity)
    with pytest.raises(ChartRetired):
        await executions.migrate_all(other.identity, machine.identity)
    again = await executions.retire(machine.identity)  # retiring twice is retired
    assert again.retired_at is not None


async def test_finished_executions_of_a_retired_revision_still_load(
    executions: Executions,
) -> None:
    machine = fresh_revision()
    execution_id = unique()
    await executions.create(machine, execution_id=execution_id)
    await executions.step(execution_id, Event(name="returned"))
    await executions.retire(machine.identity)
    fresh = Executions(executions.pool, executor=executions._executor)  # compiles from the row
    execution, state = await fresh.load(execution_id)
    assert execution.status == "completed"
    assert not state.running


async def test_every_source_is_asked_about_every_execution_in_pages(
    executions: Executions, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(revisions_module, "PIN_PAGE", 2)
    machine = fresh_revision()
    ids = sorted(unique() for _ in range(5))
    for execution_id in ids:
        await executions.create(machine, execution_id=execution_id)
        await executions.step(execution_id, Event(name="returned"))
    first, second = Counting(), Counting({"things": 0, "others": 0})
    await executions.retire(machine.identity, pin_sources=[first, second])
    assert first.pages == [ids[0:2], ids[2:4], ids[4:5]]
    assert second.pages == first.pages


async def test_a_revision_without_executions_still_asks_its_sources(
    executions: Executions,
) -> None:
    machine = fresh_revision()
    await executions.register(machine)
    source = Counting()
    await executions.retire(machine.identity, pin_sources=[source])
    assert source.pages == [[]]


async def test_a_count_of_any_source_refuses(executions: Executions) -> None:
    machine = fresh_revision()
    await executions.register(machine)
    pinning = Counting({"holds": 2, "loans": 0}, name="library")
    with pytest.raises(RetirementRefused, match="library: holds=2") as caught:
        await executions.retire(machine.identity, pin_sources=[Counting(), pinning])
    assert caught.value.pins.counts["library"] == {"holds": 2, "loans": 0}
    assert caught.value.pins.counts["counting"] == {"things": 0}
    assert (await executions.revision(machine.identity)).retired_at is None


async def test_a_source_that_raises_refuses(executions: Executions) -> None:
    machine = fresh_revision()
    await executions.register(machine)
    after = Counting()
    with pytest.raises(RetirementRefused, match="Raising raised ConnectionError") as caught:
        await executions.retire(machine.identity, pin_sources=[Raising(), after])
    assert caught.value.pins.failure == (
        "Raising",
        "raised ConnectionError: the timer store is down",
    )
    assert after.pages == []  # the sources after a failure are not asked
    assert (await executions.revision(machine.identity)).retired_at is None


@pytest.mark.parametrize(
    "answer",
    [None, [], {"timers": -1}, {"timers": True}, {"timers": 1.0}, {"": 0}, {3: 0}, {"t": 2**63}],
)
async def test_a_source_that_answers_no_counts_refuses(executions: Executions, answer: Any) -> None:
    machine = fresh_revision()
    await executions.register(machine)

    class Odd:
        async def pins(self, chart_identity: str, execution_ids: Sequence[str]) -> Any:
            return answer

    with pytest.raises(RetirementRefused, match="Odd answered"):
        await executions.retire(machine.identity, pin_sources=[Odd()])


async def test_pins_reports_without_retiring(executions: Executions) -> None:
    machine = fresh_revision()
    await executions.create(machine, execution_id=unique())
    report = await executions.pins(machine.identity, pin_sources=[Counting({"x": 3})])
    assert report.pinned
    assert report.counts == {
        "executions": {"active": 1, "needs_migration": 0},
        "fan_outs": {"open": 0},
        "invoked_by": {"revisions": 0},
        "counting": {"x": 3},
    }
    assert (await executions.revision(machine.identity)).retired_at is None


async def test_what_is_not_a_pin_source_is_refused(executions: Executions) -> None:
    machine = fresh_revision()
    await executions.register(machine)
    with pytest.raises(InvalidArgument, match="not a PinSource"):
        await executions.retire(machine.identity, pin_sources=[object()])  # type: ignore[list-item]


async def test_our_execution_source_is_a_pin_source(executions: Executions) -> None:
    machine = fresh_revision()
    execution_id = unique()
    await executions.create(machine, execution_id=execution_id)
    source = ExecutionPins(executions.pool, prefix=executions.prefix)
    assert isinstance(source, PinSource)
    assert await source.pins(machine.identity, [execution_id, unique()]) == {
        "active": 1,
        "needs_migration": 0,
    }
    assert await source.pins(fresh_revision().identity, [execution_id]) == {
        "active": 0,
        "needs_migration": 0,
    }


async def test_a_create_waits_for_a_retire_in_progress_and_is_refused(
    executions: Executions, store: AsyncConnectionPool
) -> None:
    machine = fresh_revision()
    await executions.register(machine)
    async with store.connection() as conn, conn.transaction():
        await executions.retire(machine.identity, conn=conn)
        creating = asyncio.create_task(executions.create(machine, execution_id=unique()))
        await blocked_by(store, conn.info.backend_pid)
        assert not creating.done()  # waiting for the revision's row
    with pytest.raises(ChartRetired):
        await creating
