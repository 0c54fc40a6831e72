"""Charts written in Python (``statifier.build``) are registered and run like parsed ones.

The registry stores a built chart's exported SCXML; any node compiles that source to the
same identity, and the chart's SCXML file registers as the same revision (a chart moves
between its two forms without a revision change).
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import statifier
from psycopg_pool import AsyncConnectionPool
from statifier.build import Chart
from statifier.core.events import Event
from statifier_persistence import Executions, InvalidArgument, Stepped

from persistence_support.common import TableExecutor, unique

SCXML = Path(__file__).resolve().parents[3] / "examples" / "card_authorization.scxml"


def example_chart() -> Chart:
    """``examples/card_authorization.py``'s chart (the examples folder is on pythonpath)."""
    chart = importlib.import_module("card_authorization").CHART
    assert isinstance(chart, Chart)
    return chart


async def armed_holds(store: AsyncConnectionPool, execution_id: str) -> list[tuple[str, bool]]:
    async with store.connection() as conn:
        cursor = await conn.execute(
            "SELECT send_id, cancelled FROM test_effects"
            " WHERE execution_id = %s AND kind = 'schedule' ORDER BY id",
            [execution_id],
        )
        return [(row[0], row[1]) for row in await cursor.fetchall()]


async def test_a_built_chart_runs_durably_and_its_scxml_is_the_same_revision(
    executions: Executions, executor: TableExecutor, store: AsyncConnectionPool
) -> None:
    version = unique("py")
    built = example_chart().compile(version=version)
    execution_id = unique()
    created = await executions.create(built, execution_id=execution_id)
    assert created.execution.chart_identity == built.identity
    assert await armed_holds(store, execution_id) == [("hold", False)]

    parsed = statifier.compile(SCXML.read_bytes(), version=version)
    assert await executions.register(parsed) == built.identity
    other = await executions.create(parsed, execution_id=unique())
    assert other.execution.chart_identity == built.identity
    listed = await executions.revisions(name="card_authorization", limit=1000)
    assert [r.identity for r in listed if r.version == version] == [built.identity]
    assert {r.executions.get("active") for r in listed if r.version == version} == {2}

    node = Executions(store, executor=executor)  # compiles what the registry stored
    stepped = await node.step(execution_id, Event(name="capture.requested"))
    assert isinstance(stepped, Stepped)
    assert stepped.state.machine.identity == built.identity
    assert stepped.state.machine.source == statifier.export(example_chart()).encode()
    assert stepped.state.active_leaf_ids() == ("capturing",)
    assert await armed_holds(store, execution_id) == [("hold", True)]
    stepped = await node.step(execution_id, Event(name="capture.succeeded"))
    assert isinstance(stepped, Stepped)
    assert stepped.execution.status == "completed"


async def test_a_built_chart_that_is_not_compiled_is_refused_with_how_to_compile_it(
    executions: Executions,
) -> None:
    with pytest.raises(InvalidArgument) as info:
        await executions.create(example_chart(), execution_id=unique())  # type: ignore[call-overload]
    assert str(info.value) == (
        "chart must be a compiled statifier.Machine, not Chart "
        "(compile a chart written in Python with its compile())"
    )
    with pytest.raises(InvalidArgument) as info:
        await executions.register("<scxml/>")  # type: ignore[arg-type]
    assert str(info.value) == "chart must be a compiled statifier.Machine, not str"
