"""BasicHTTP sends in durable steps, on real PostgreSQL: an executor that makes no POSTs
refuses them, a ``PostExecutor`` stores them in the step, and a failure after the step is
raised once through ``Executions.send_failed``."""

from __future__ import annotations

from typing import Any

import pytest
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from statifier.core import planner
from statifier.core.events import Event
from statifier_persistence import (
    AlreadyApplied,
    Discarded,
    EffectRefused,
    Executions,
    InvalidArgument,
    Limits,
    PostExecutor,
    Stepped,
)
from statifier_persistence._drive import NO_POSTS

from persistence_support.common import TableExecutor, chart, unique

SENDER = chart(
    """
    <datamodel><data id="why"/></datamodel>
    <state id="s">
      <onentry><send id="h" type="basichttp" event="ping" target="https://a.example/in"/></onentry>
      <transition event="error.communication" target="failed">
        <assign location="why" expr="_event.data"/>
      </transition>
      <transition event="stop" target="end"/>
    </state>
    <final id="failed"/>
    <final id="end"/>
    """,
    name="sender",
)


class PostingExecutor(TableExecutor):
    """``TableExecutor`` that keeps the POSTs it is asked for (or refuses them)."""

    def __init__(self, refuse: str | None = None) -> None:
        super().__init__()
        self.posts: list[tuple[str, planner.Post]] = []
        self.refuse_posts = refuse

    async def post(self, conn: AsyncConnection[Any], execution_id: str, post: planner.Post) -> None:
        if self.refuse_posts is not None:
            raise EffectRefused(self.refuse_posts)
        self.posts.append((execution_id, post))


async def test_an_executor_that_makes_no_posts_refuses_each_at_once(
    executions: Executions,
) -> None:
    assert not isinstance(executions.executor, PostExecutor)
    execution_id = unique()
    created = await executions.create(SENDER, execution_id=execution_id)
    assert created.state.datamodel["why"] == {"message": NO_POSTS}
    assert created.execution.status == "completed"


async def test_a_post_executor_gets_the_post_in_the_step(store: AsyncConnectionPool) -> None:
    executor = PostingExecutor()
    executions = Executions(store, executor=executor)
    execution_id = unique()
    created = await executions.create(SENDER, execution_id=execution_id)
    ((scope, post),) = executor.posts
    assert (scope, post.url, post.effect.event, post.effect.send_id) == (
        execution_id, "https://a.example/in", "ping", "h"
    )  # fmt: skip
    assert created.state.active_leaf_ids() == ("s",)


async def test_a_refused_post_is_error_communication_at_once(store: AsyncConnectionPool) -> None:
    executions = Executions(store, executor=PostingExecutor(refuse="not on the list"))
    created = await executions.create(SENDER, execution_id=unique())
    assert created.state.datamodel["why"] == {"message": "not on the list"}


async def test_a_failure_after_the_step_is_raised_once(store: AsyncConnectionPool) -> None:
    executions = Executions(store, executor=PostingExecutor())
    execution_id = unique()
    await executions.create(SENDER, execution_id=execution_id)
    failure = planner.post_failed("h", "answered 500", status=500, attempts=5)
    stepped = await executions.send_failed(execution_id, failure, key="job:9")
    assert isinstance(stepped, Stepped)
    assert stepped.state.datamodel["why"] == {
        "message": "answered 500",
        "status": 500,
        "attempts": 5,
    }
    assert stepped.execution.status == "completed"
    again = await executions.send_failed(execution_id, failure, key="job:9")
    assert isinstance(again, AlreadyApplied)
    page = await executions.history(execution_id)
    assert page.entries[-1].kind == "event"
    assert page.entries[-1].event is not None
    assert page.entries[-1].event.name == "error.communication"


async def test_a_failure_after_the_execution_ended_is_discarded(store: AsyncConnectionPool) -> None:
    executions = Executions(store, executor=PostingExecutor())
    execution_id = unique()
    await executions.create(SENDER, execution_id=execution_id)
    await executions.step(execution_id, Event(name="stop"))
    answer = await executions.send_failed(execution_id, planner.post_failed("h", "late"))
    assert isinstance(answer, Discarded)


MANY = chart(
    """
    <datamodel><data id="errors" expr="[]"/></datamodel>
    <state id="s">
      <transition event="go">
        <foreach array="[1, 2, 3]" item="n">
          <send type="basichttp" event="ping" target="https://a.example/in" namelist="n"/>
        </foreach>
      </transition>
      <transition event="error.communication">
        <assign location="errors" expr="errors + [_event.data]"/>
      </transition>
    </state>
    """,
    name="many",
)


async def test_the_posts_of_one_step_are_bounded(store: AsyncConnectionPool) -> None:
    executor = PostingExecutor()
    executions = Executions(store, executor=executor, limits=Limits(max_posts=2))
    execution_id = unique()
    await executions.create(MANY, execution_id=execution_id)
    stepped = await executions.step(execution_id, Event(name="go"))
    assert isinstance(stepped, Stepped)
    assert [post.effect.data for _, post in executor.posts] == [{"n": 1}, {"n": 2}]
    assert stepped.state.datamodel["errors"] == [
        {"message": "more than 2 BasicHTTP sends in one step"}
    ]
    # The bound is per step: the next one may make as many again.
    again = await executions.step(execution_id, Event(name="go"))
    assert isinstance(again, Stepped)
    assert len(executor.posts) == 4
    assert len(again.state.datamodel["errors"]) == 2


@pytest.mark.parametrize("failure", [Event(name="ping"), "error.communication", None])
async def test_only_an_error_event_is_a_failure(executions: Executions, failure: Any) -> None:
    with pytest.raises(InvalidArgument, match="error event"):
        await executions.send_failed("any", failure)
