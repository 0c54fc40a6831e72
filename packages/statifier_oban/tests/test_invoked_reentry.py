"""A child that finished before its parent left the invoking state, when the state is
entered again before the child's ``done`` is applied (ADR 31, its amendment).

The finished child's ``done`` waits in the parent's mailbox; meanwhile the parent leaves
the state and enters it again, which starts a new child under the same invoke id. The
waiting ``done`` belongs to the first invocation: it is declined as superseded, and the
parent goes on waiting for the new child, whose own ``done`` (or cancel) works. Each test
runs on a ``DurableEnv`` (real workers, every message a ``MessageWorker`` job).
"""

from __future__ import annotations

from typing import Any

import pytest
import statifier
from statifier.core.events import Event
from statifier_oban.testing import DurableEnv

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python"'

CHILD = f"""<scxml {NS} initial="w">
  <datamodel><data id="quick" expr="False"/><data id="g" expr="0"/></datamodel>
  <state id="w">
    <transition cond="quick" target="f"/>
    <transition event="finish" target="f"/>
  </state>
  <final id="f"><donedata><param name="g" expr="g"/></donedata></final>
</scxml>"""
"""Finishes in its initial drive when ``quick``, else on ``finish``; answers its ``g``."""

PARENT = statifier.compile(
    f"""<scxml {NS} name="reentering" initial="S">
  <datamodel><data id="gen" expr="0"/><data id="got" expr="None"/></datamodel>
  <state id="S">
    <onentry><assign location="gen" expr="gen + 1"/></onentry>
    <invoke id="x" type="scxml">
      <param name="quick" expr="gen == 1"/><param name="g" expr="gen"/>
      <content>{CHILD}</content>
    </invoke>
    <transition event="leave" target="T"/>
    <transition event="poke"><send target="#_x" event="finish"/></transition>
    <transition event="done.invoke.x" target="D">
      <assign location="got" expr="_event.data"/>
    </transition>
  </state>
  <state id="T"><transition event="back" target="S"/></state>
  <final id="D"/>
</scxml>"""
)
"""Its first child (``gen`` 1) finishes at once; every later one waits for ``finish``."""


async def children(env: DurableEnv, parent_id: str) -> dict[str, str]:
    """Status -> id of each child of ``parent_id`` (one child per status here)."""
    page = await env.executions.list(parent=parent_id)
    found: dict[str, str] = {child.status: child.id for child in page.executions}
    assert len(found) == len(page.executions)
    return found


async def job_errors(env: DurableEnv, job_id: int) -> list[Any]:
    """The error texts oban recorded on a job."""
    async with env.pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT e->>'error' FROM oban_jobs, jsonb_array_elements(to_jsonb(errors)) e"
            " WHERE id = %s",
            [job_id],
        )
        return [row[0] for row in await cursor.fetchall()]


async def armed_finished(env: DurableEnv, execution_id: str) -> Any:
    """The ``finished`` part of an execution's armed list (None when it has none)."""
    async with env.pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT armed->'finished' FROM statifier_executions WHERE id = %s", [execution_id]
        )
        row = await cursor.fetchone()
        assert row is not None
        return row[0]


@pytest.mark.parametrize("then", ["second_done", "second_cancelled"])
async def test_a_finished_childs_done_is_not_taken_by_the_next_invocation_of_its_id(
    durable_env: DurableEnv, then: str
) -> None:
    env = durable_env
    await env.executions.create(PARENT, execution_id="p")
    first = (await children(env, "p"))["completed"]  # its done waits in p's mailbox
    await env.executions.step("p", Event(name="leave"))
    await env.executions.step("p", Event(name="back"))  # S again: a second child starts
    second = (await children(env, "p"))["active"]

    ran = await env.settle()
    # The one job was the first child's done: declined, not applied to the second
    # invocation of x.
    assert [(job.kind, job.scope, job.outcome) for job in ran] == [("message", "p", "cancelled")]
    assert await job_errors(env, ran[0].job_id) == ["discarded: invocation_superseded"]
    await env.assert_active("p", "S")
    await env.assert_datamodel("p", gen=2, got=None)
    assert await children(env, "p") == {"completed": first, "active": second}
    assert await armed_finished(env, "p") is None  # forgotten when x started again

    if then == "second_done":
        await env.executions.step("p", Event(name="poke"))
        await env.settle()
        await env.assert_done("p", "D")
        await env.assert_datamodel("p", got={"g": 2})  # the second child's answer
        assert (await env.executions.get(second)).status == "completed"
    else:
        await env.executions.step("p", Event(name="leave"))
        await env.settle()
        await env.assert_active("p", "T")
        assert (await env.executions.get(second)).status == "cancelled"


async def test_a_row_still_naming_the_finished_child_beside_the_new_one_declines_it(
    durable_env: DurableEnv,
) -> None:
    # A row whose armed list was written before a restart of the invoke id forgot its
    # finished child (so by an earlier version) names both: the new child wins.
    env = durable_env
    await env.executions.create(PARENT, execution_id="p")
    first = (await children(env, "p"))["completed"]
    await env.executions.step("p", Event(name="leave"))
    await env.executions.step("p", Event(name="back"))
    async with env.pool.connection() as conn:
        await conn.execute(
            "UPDATE statifier_executions SET armed = jsonb_set(armed, '{finished}',"
            " jsonb_build_object('x', %s::text)) WHERE id = 'p'",
            [first],
        )
    assert await armed_finished(env, "p") == {"x": first}

    ran = await env.settle()
    assert [(job.kind, job.outcome) for job in ran] == [("message", "cancelled")]
    assert await job_errors(env, ran[0].job_id) == ["discarded: invocation_superseded"]
    await env.assert_active("p", "S")
    await env.assert_datamodel("p", got=None)
