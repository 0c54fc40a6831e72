"""``<invoke type="scxml">`` in durable executions: the child is an execution started in the
parent's step, and everything between them is a message applied by a step of the receiver.

The executor here (``MailboxTableExecutor``) writes a ``deliver`` row where oban would
store a job; ``pump`` plays those rows as workers would (oldest first, or newest first as
racing workers might), each delivery keyed by its row. Real jobs and workers are
``statifier_oban``'s tests.
"""

from __future__ import annotations

from typing import Any

import pytest
import statifier
from psycopg_pool import AsyncConnectionPool
from statifier.core.effects import ErrorRaised, Log
from statifier.core.events import Event
from statifier_persistence import (
    NO_MESSAGE,
    AlreadyApplied,
    ChartUnusable,
    Declined,
    Execution,
    Executions,
    InvalidArgument,
    Limits,
    LoggingHost,
    RetirementRefused,
    Stepped,
    invoked_child_id,
)

from persistence_support.common import (
    NS,
    InjectedFailure,
    MailboxTableExecutor,
    chart,
    pump,
    unique,
)

PARENT = chart(
    """
    <datamodel>
      <data id="heard" expr="[]"/><data id="answer" expr="None"/><data id="n" expr="7"/>
    </datamodel>
    <state id="running">
      <invoke id="kid" type="scxml">
        <param name="n" expr="n"/>
        <param name="undeclared" expr="1"/>
        <content>
          <scxml xmlns="http://www.w3.org/2005/07/scxml" initial="k">
            <datamodel><data id="n" expr="0"/><data id="got" expr="None"/></datamodel>
            <state id="k">
              <onentry>
                <send target="#_parent" event="hello"><param name="n" expr="n"/></send>
                <send target="#_parent" event="again"/>
              </onentry>
              <transition event="go" target="kdone">
                <assign location="got" expr="_event.data"/>
              </transition>
            </state>
            <final id="kdone">
              <donedata><param name="got" expr="got"/><param name="n" expr="n"/></donedata>
            </final>
          </scxml>
        </content>
        <finalize><assign location="heard" expr="heard + [_event.name]"/></finalize>
      </invoke>
      <transition event="hello"><send target="#_kid" event="go" namelist="n"/></transition>
      <transition event="done.invoke.kid" target="finished">
        <assign location="answer" expr="_event.data"/>
      </transition>
      <transition event="leave" target="left"/>
      <transition event="again.reenter" target="running"/>
    </state>
    <state id="left"/>
    <final id="finished"/>
    """,
    name="parent",
)


def mailbox_executions(pool: AsyncConnectionPool, **limits: Any) -> Executions:
    """``Executions`` whose executor runs invoked charts (``deliver`` rows)."""
    return Executions(pool, executor=MailboxTableExecutor(), limits=Limits(**limits))


async def rows(pool: AsyncConnectionPool, query: str, *params: Any) -> list[tuple[Any, ...]]:
    """The rows a test query returns."""
    async with pool.connection() as conn:
        cursor = await conn.execute(query, params)
        return await cursor.fetchall()


async def test_the_child_is_an_execution_started_in_the_parents_step(
    store: AsyncConnectionPool,
) -> None:
    executions = mailbox_executions(store)
    parent_id = unique("parent")
    created = await executions.create(PARENT, execution_id=parent_id)
    child_id = invoked_child_id(parent_id, "kid", created.state.macrostep)
    child, state = await executions.load(child_id)
    assert child.parent is not None
    assert (child.parent.execution_id, child.parent.invoke_id, child.parent.index) == (
        parent_id,
        "kid",
        None,
    )
    assert child.status == "active"
    assert state.datamodel["n"] == 7  # the param it declares
    assert "undeclared" not in state.datamodel  # a param it does not declare is not passed
    (armed,) = await rows(store, "SELECT armed FROM statifier_executions WHERE id = %s", parent_id)
    assert armed[0]["children"] == {"kid": child_id}
    page = await executions.list(parent=parent_id)
    assert [execution.id for execution in page.executions] == [child_id]
    # Its two sends to #_parent wait in the parent's mailbox, one delivery each.
    delivered = await rows(
        store, "SELECT count(*) FROM test_effects WHERE kind = 'deliver' AND execution_id = %s",
        parent_id,
    )  # fmt: skip
    assert delivered == [(2,)]


@pytest.mark.parametrize("newest_first", [False, True])
async def test_every_channel_carries_its_messages_once_and_in_order(
    store: AsyncConnectionPool, newest_first: bool
) -> None:
    executions = mailbox_executions(store)
    parent_id = unique("parent")
    created = await executions.create(PARENT, execution_id=parent_id)
    child_id = invoked_child_id(parent_id, "kid", created.state.macrostep)
    answers = await pump(executions, parent_id, newest_first=newest_first)
    parent, state = await executions.load(parent_id)
    assert parent.status == "completed"
    assert state.datamodel["answer"] == {"got": {"n": 7}, "n": 7}
    # <finalize> ran on each event from the child, before the transitions saw it, in the
    # order the child sent them, whichever delivery ran first.
    assert state.datamodel["heard"] == ["hello", "again", "done.invoke.kid"]
    assert sorted(answers) == sorted(
        [
            (parent_id, "Stepped"),  # hello
            (parent_id, "Stepped"),  # again
            (child_id, "Stepped"),  # go
            (parent_id, "Stepped"),  # done.invoke.kid
        ]
    )
    waiting = "SELECT count(*) FROM statifier_messages WHERE execution_id IN (%s, %s)"
    assert await rows(store, waiting, parent_id, child_id) == [(0,)]
    child = await executions.get(child_id)
    assert child.status == "completed"


async def test_a_delivery_run_twice_applies_its_message_once(store: AsyncConnectionPool) -> None:
    executions = mailbox_executions(store)
    parent_id = unique("parent")
    await executions.create(PARENT, execution_id=parent_id)
    first = await executions.receive(parent_id, key="job:1")
    again = await executions.receive(parent_id, key="job:1")
    assert isinstance(first, Stepped)
    assert isinstance(again, AlreadyApplied)
    second = await executions.receive(parent_id, key="job:2")
    assert isinstance(second, Stepped)
    empty = await executions.receive(parent_id, key="job:3")
    assert isinstance(empty, Declined)
    assert empty.reason == NO_MESSAGE
    _, state = await executions.load(parent_id)
    assert state.datamodel["heard"] == ["hello", "again"]


async def test_receive_needs_an_executor_that_runs_invoked_charts(
    executions: Executions,
) -> None:
    with pytest.raises(InvalidArgument, match="MailboxExecutor"):
        await executions.receive(unique())


def nested(level: int, depth: int) -> str:
    """A chart that invokes itself ``depth`` levels deep, inline; each level arms a timer,
    counts its exits in ``exits`` (for the test to read) and sends ``up`` to its parent."""
    ns = 'xmlns="http://www.w3.org/2005/07/scxml"'
    inner = ""
    if level < depth:
        child = nested(level + 1, depth)
        inner = f'<invoke id="down" type="scxml"><content>{child}</content></invoke>'
    return f"""<scxml {ns} initial="work" name="level{level}">
      <state id="work">
        <onentry>
          <send id="tick" event="tick" delay="1h"/><send target="#_parent" event="up"/>
        </onentry>
        <onexit><send target="#_parent" event="bye.{level}"/></onexit>
        {inner}
        <transition event="leave" target="idle"/>
      </state>
      <state id="idle"/>
    </scxml>"""


async def test_a_tree_of_three_is_cancelled_from_the_top(store: AsyncConnectionPool) -> None:
    executions = mailbox_executions(store)
    top = unique("top")
    await executions.create(statifier.compile(nested(0, 2)), execution_id=top)
    (child,) = (await executions.list(parent=top)).executions
    (grandchild,) = (await executions.list(parent=child.id)).executions
    assert (await executions.load(grandchild.id))[1].is_active("work")
    cancelled = await executions.cancel(top)
    assert cancelled.execution.status == "cancelled"
    answers = await pump(executions, top)
    for execution_id in (child.id, grandchild.id):
        row = await executions.get(execution_id)
        assert row.status == "cancelled", execution_id
        # its cancel ran: onexit sent bye.<level> (declined by a parent no longer listening),
        # and its armed timer was cancelled
        dropped = await rows(
            store, "SELECT send_id FROM test_effects WHERE kind = 'drop' AND execution_id = %s",
            execution_id,
        )  # fmt: skip
        assert dropped == [("tick",)]
    assert (top, "Discarded") in answers  # the messages to the cancelled top
    assert (child.id, "Stepped") in answers  # the cancel
    assert (grandchild.id, "Stepped") in answers  # its cancel, sent by the child's cancel


async def test_leaving_the_invoking_state_cancels_the_child_and_declines_its_messages(
    store: AsyncConnectionPool,
) -> None:
    executions = mailbox_executions(store)
    parent_id = unique("parent")
    created = await executions.create(PARENT, execution_id=parent_id)
    child_id = invoked_child_id(parent_id, "kid", created.state.macrostep)
    await executions.step(parent_id, Event(name="leave"))
    answers = await pump(executions, parent_id)
    _, state = await executions.load(parent_id)
    assert state.configuration_ids() == ("left",)
    assert state.datamodel["heard"] == []  # hello and again came from a cancelled child
    assert answers == [
        (parent_id, "Declined:invocation_not_live"),
        (parent_id, "Declined:invocation_not_live"),
        (child_id, "Stepped"),  # the cancel
    ]
    assert (await executions.get(child_id)).status == "cancelled"


async def test_a_superseded_childs_messages_are_declined(store: AsyncConnectionPool) -> None:
    executions = mailbox_executions(store)
    parent_id = unique("parent")
    created = await executions.create(PARENT, execution_id=parent_id)
    first = invoked_child_id(parent_id, "kid", created.state.macrostep)
    again = await executions.step(parent_id, Event(name="again.reenter"))  # exit and re-enter
    assert isinstance(again, Stepped)
    second = invoked_child_id(parent_id, "kid", again.state.macrostep)
    assert second != first
    answers = await pump(executions, parent_id)
    assert answers[:2] == [
        (parent_id, "Declined:invocation_superseded"),
        (parent_id, "Declined:invocation_superseded"),
    ]
    parent, state = await executions.load(parent_id)
    assert parent.status == "completed"
    assert state.datamodel["heard"] == ["hello", "again", "done.invoke.kid"]  # the second's
    assert (await executions.get(first)).status == "cancelled"
    assert (await executions.get(second)).status == "completed"


AUTOFORWARD = chart(
    """
    <datamodel><data id="echoes" expr="[]"/></datamodel>
    <state id="s">
      <invoke id="echo" type="scxml" autoforward="true">
        <content>
          <scxml xmlns="http://www.w3.org/2005/07/scxml" initial="e">
            <state id="e">
              <transition event="ping">
                <send target="#_parent" event="pong">
                  <param name="n" expr="_event.data['n']"/>
                </send>
              </transition>
              <transition event="stop" target="end"/>
            </state>
            <final id="end"/>
          </scxml>
        </content>
      </invoke>
      <transition event="pong">
        <assign location="echoes" expr="echoes + [_event.data['n']]"/>
      </transition>
      <transition event="done.invoke.echo" target="end"/>
    </state>
    <final id="end"/>
    """
)


async def test_autoforward_forwards_every_external_event_the_parent_processes(
    store: AsyncConnectionPool,
) -> None:
    executions = mailbox_executions(store)
    parent_id = unique("parent")
    await executions.create(AUTOFORWARD, execution_id=parent_id)
    for n in (1, 2, 3):
        await executions.step(parent_id, Event(name="ping", data={"n": n}))
    await executions.step(parent_id, Event(name="stop"))
    await pump(executions, parent_id)
    parent, state = await executions.load(parent_id)
    assert state.datamodel["echoes"] == [1, 2, 3]
    assert parent.status == "completed"


FAILING = chart(
    """
    <datamodel><data id="errors" expr="[]"/><data id="which" expr="'nowhere'"/></datamodel>
    <state id="s">
      <invoke id="bad" type="scxml">
        <content>
          <scxml xmlns="http://www.w3.org/2005/07/scxml"><state id="x" initial="nope"/></scxml>
        </content>
      </invoke>
      <invoke id="missing" type="scxml" srcexpr="which"/>
      <transition event="error.communication.invoke.*">
        <assign location="errors" expr="errors + [_event.name]"/>
      </transition>
    </state>
    """
)


async def test_a_child_that_cannot_start_is_an_error_in_the_parent(
    store: AsyncConnectionPool,
) -> None:
    executions = mailbox_executions(store)
    parent_id = unique("parent")
    created = await executions.create(FAILING, execution_id=parent_id)
    assert created.state.datamodel["errors"] == [
        "error.communication.invoke.bad",
        "error.communication.invoke.missing",
    ]
    errors = [e for e in created.effects if type(e).__name__ == "ErrorRaised"]
    assert any("does not compile" in e.message for e in errors)  # type: ignore[attr-defined]
    assert any("'nowhere'" in e.message for e in errors)  # type: ignore[attr-defined]
    assert (await executions.list(parent=parent_id)).executions == ()


def self_invoking(name: str) -> statifier.Machine:
    """A chart registered as ``name`` that invokes itself by that name, and catches the
    error its last level hears."""
    return statifier.compile(
        f"""<scxml {NS} initial="s"><state id="s">
          <invoke id="again" type="scxml" src="{name}"/>
          <transition event="error.communication.invoke.again" target="deepest"/>
        </state><state id="deepest"/></scxml>""",
        name=name,
    )


async def test_a_tree_is_as_deep_as_the_limit_and_no_deeper(store: AsyncConnectionPool) -> None:
    name = unique("selfish")
    machine = self_invoking(name)
    executions = mailbox_executions(store, max_invoke_depth=3)
    top = unique("top")
    await executions.create(machine, execution_id=top)
    tree = await rows(
        store,
        "SELECT tree_depth, status FROM statifier_executions WHERE id = %s OR tree_root = %s"
        " ORDER BY tree_depth",
        top,
        top,
    )
    assert tree == [(0, "active"), (1, "active"), (2, "active"), (3, "active")]
    (deepest,) = await rows(
        store, "SELECT id FROM statifier_executions WHERE tree_root = %s AND tree_depth = 3", top
    )
    _, state = await executions.load(deepest[0])
    assert state.configuration_ids() == ("deepest",)


async def test_a_tree_holds_at_most_its_limit_of_live_executions(
    store: AsyncConnectionPool,
) -> None:
    name = unique("selfish")
    executions = mailbox_executions(store, max_tree_executions=5)
    top = unique("top")
    await executions.create(self_invoking(name), execution_id=top)
    live = await rows(
        store,
        "SELECT count(*) FROM statifier_executions WHERE id = %s OR tree_root = %s",
        top,
        top,
    )
    assert live == [(5,)]  # the top and four children; the fifth child did not start


def named_child(name: str, answer: int) -> statifier.Machine:
    """A chart registered as ``name`` that finishes at once with ``{"answer": answer}``."""
    return statifier.compile(
        f"""<scxml {NS} initial="f"><final id="f">
          <donedata><param name="answer" expr="{answer}"/></donedata>
        </final></scxml>""",
        name=name,
        version=str(answer),
    )


def invoking(src: str, dynamic: bool = False) -> statifier.Machine:
    """A chart whose invocation starts the chart registered as ``src`` (written in the
    chart, or the value of a ``srcexpr``), and keeps its answer."""
    invoke = f'srcexpr="{src!r}"' if dynamic else f'src="{src}"'
    return statifier.compile(
        f"""<scxml {NS} initial="s">
          <datamodel><data id="answer" expr="None"/></datamodel>
          <state id="s">
            <invoke id="kid" type="scxml" {invoke}/>
            <transition event="done.invoke.kid" target="got">
              <assign location="answer" expr="_event.data['answer']"/>
            </transition>
            <transition event="again" target="s"/>
          </state>
          <state id="got"><transition event="again" target="s"/></state>
        </scxml>"""
    )


async def answers_of(executions: Executions, parent_id: str) -> Any:
    """The parent's ``answer`` once its deliveries ran."""
    await pump(executions, parent_id)
    return (await executions.load(parent_id))[1].datamodel["answer"]


@pytest.mark.parametrize("dynamic", [False, True])
async def test_a_src_names_a_registered_chart_and_the_parent_revision_pins_it(
    store: AsyncConnectionPool, dynamic: bool
) -> None:
    executions = mailbox_executions(store)
    name = unique("child")
    v1 = await executions.register(named_child(name, 1))
    parent = invoking(name, dynamic)
    await executions.register(parent)
    links = "SELECT target_identity FROM statifier_chart_links WHERE chart_identity = %s"
    # A src written in the chart is linked when the revision is registered; a srcexpr's
    # value when it is first used.
    assert await rows(store, links, parent.identity) == ([] if dynamic else [(v1,)])
    first = unique("parent")
    await executions.create(parent, execution_id=first)
    assert await answers_of(executions, first) == 1
    assert await rows(store, links, parent.identity) == [(v1,)]
    await executions.register(named_child(name, 2))  # a newer revision of the child
    second = unique("parent")
    await executions.create(parent, execution_id=second)
    assert await answers_of(executions, second) == 1  # the parent revision pins v1
    # A new revision of the parent links the newest child revision.
    parent_v2 = statifier.compile(parent.source, version="2")
    third = unique("parent")
    await executions.create(parent_v2, execution_id=third)
    assert await answers_of(executions, third) == 2


async def test_a_chart_invoking_an_unregistered_src_is_refused_at_registration(
    store: AsyncConnectionPool,
) -> None:
    executions = mailbox_executions(store)
    name = unique("nobody")
    with pytest.raises(ChartUnusable, match=f"no chart is registered under the name '{name}'"):
        await executions.register(invoking(name))
    registered = "SELECT count(*) FROM statifier_charts WHERE identity = %s"
    assert await rows(store, registered, invoking(name).identity) == [(0,)]


async def test_an_invoked_revision_is_retired_only_once_nothing_invokes_it(
    store: AsyncConnectionPool,
) -> None:
    executions = mailbox_executions(store)
    name = unique("child")
    child = await executions.register(named_child(name, 1))
    parent = await executions.register(invoking(name))
    with pytest.raises(RetirementRefused) as refused:
        await executions.retire(child)
    assert refused.value.pins.counts["invoked_by"] == {"revisions": 1}
    await executions.retire(parent)
    retired = await executions.retire(child)
    assert retired.retired_at is not None


async def test_inline_content_is_registered_by_identity_and_not_under_its_name(
    store: AsyncConnectionPool,
) -> None:
    executions = mailbox_executions(store)
    name = unique("hijack")
    await executions.register(named_child(name, 1))
    sneaky = chart(
        f"""<state id="s"><invoke id="kid" type="scxml"><content>
          <scxml xmlns="http://www.w3.org/2005/07/scxml" name="{name}" initial="f">
            <final id="f"><donedata><param name="answer" expr="666"/></donedata></final>
          </scxml>
        </content></invoke></state>"""
    )
    await executions.create(sneaky, execution_id=unique("sneaky"))
    names = "SELECT count(*) FROM statifier_charts WHERE name = %s"
    assert await rows(store, names, name) == [(1,)]  # the host's, and only it
    parent_id = unique("parent")
    await executions.create(invoking(name, dynamic=True), execution_id=parent_id)
    assert await answers_of(executions, parent_id) == 1


async def test_a_full_mailbox_refuses_a_send_and_the_sender_hears_it(
    store: AsyncConnectionPool,
) -> None:
    executions = mailbox_executions(store, max_pending_messages=1)
    parent_id = unique("parent")
    created = await executions.create(PARENT, execution_id=parent_id)
    child_id = invoked_child_id(parent_id, "kid", created.state.macrostep)
    child, state = await executions.load(child_id)
    # hello took the one place; again was refused, and the child heard error.communication
    waiting = "SELECT kind FROM statifier_messages WHERE execution_id = %s"
    assert await rows(store, waiting, parent_id) == [("to_parent",)]
    assert child.status == "active"
    assert state.is_active("k")
    assert await executions.receive(parent_id, key="d1") is not None
    assert await rows(store, waiting, parent_id) == []


async def test_an_unreadable_message_is_declined_and_dropped(store: AsyncConnectionPool) -> None:
    executions = mailbox_executions(store)
    parent_id = unique("parent")
    await executions.create(PARENT, execution_id=parent_id)
    async with store.connection() as conn:
        await conn.execute(
            "UPDATE statifier_messages SET body = '{\"name\": 5}'::jsonb"
            " WHERE id = (SELECT min(id) FROM statifier_messages WHERE execution_id = %s)",
            [parent_id],
        )
    first = await executions.receive(parent_id, key="d1")
    assert isinstance(first, Declined)
    assert first.reason == "message_unreadable"
    second = await executions.receive(parent_id, key="d2")
    assert isinstance(second, Stepped)
    assert second.state.datamodel["heard"] == ["again"]


FINISHES_FIRST = chart(
    """
    <datamodel><data id="seen" expr="[]"/></datamodel>
    <state id="s0">
      <invoke id="kid" type="scxml">
        <content>
          <scxml xmlns="http://www.w3.org/2005/07/scxml" initial="f">
            <final id="f"><onexit><send target="#_parent" event="bye"/></onexit></final>
          </scxml>
        </content>
      </invoke>
      <transition event="bye" target="s1"><assign location="seen" expr="['bye']"/></transition>
    </state>
    <state id="s1">
      <transition event="done.invoke.kid" target="s2">
        <assign location="seen" expr="seen + [_event.name]"/>
      </transition>
    </state>
    <state id="s2"/>
    """
)


async def test_a_child_that_finished_before_its_state_was_left_still_answers(
    store: AsyncConnectionPool,
) -> None:
    # W3C test 236: the child's last send, then its done, arrive after the parent left the
    # invoking state on that very send; live sessions deliver both, and so do executions.
    executions = mailbox_executions(store)
    parent_id = unique("parent")
    created = await executions.create(FINISHES_FIRST, execution_id=parent_id)
    child_id = invoked_child_id(parent_id, "kid", created.state.macrostep)
    assert (await executions.get(child_id)).status == "completed"
    first = await executions.receive(parent_id, key="d1")  # bye: s0 is left
    assert isinstance(first, Stepped)
    armed = "SELECT armed->'finished' FROM statifier_executions WHERE id = %s"
    assert await rows(store, armed, parent_id) == [({"kid": child_id},)]
    second = await executions.receive(parent_id, key="d2")
    assert isinstance(second, Stepped)
    assert second.state.configuration_ids() == ("s2",)
    assert second.state.datamodel["seen"] == ["bye", "done.invoke.kid"]
    assert await rows(store, armed, parent_id) == [(None,)]
    cancels = "SELECT count(*) FROM statifier_messages WHERE execution_id = %s"
    assert await rows(store, cancels, child_id) == [(0,)]  # no cancel for a finished child


class Reports(LoggingHost):
    """The default host, keeping what it was asked to report."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def report(self, execution: Execution, effect: Log | ErrorRaised) -> None:
        """Keep ``(execution id, log value)``."""
        self.seen.append((execution.id, getattr(effect, "value", None)))


LOGGING = chart(
    """
    <state id="s">
      <onentry><log expr="'parent'"/></onentry>
      <invoke id="kid" type="scxml"><content>
        <scxml xmlns="http://www.w3.org/2005/07/scxml" initial="k">
          <state id="k">
            <onentry><log expr="'child'"/><send target="#_parent" event="hi"/></onentry>
          </state>
        </scxml>
      </content></invoke>
      <invoke id="job" type="test:job"/>
    </state>
    """
)


async def test_a_childs_reports_wait_for_the_parents_commit(store: AsyncConnectionPool) -> None:
    executor = MailboxTableExecutor()
    host = Reports()
    executions = Executions(store, executor=executor, host=host)
    executor.fail.add("invoke")  # the job invoked after the child: the parent's step fails
    with pytest.raises(InjectedFailure):
        await executions.create(LOGGING, execution_id=unique("parent"))
    assert host.seen == []  # nothing committed, nothing reported (the child's log neither)
    executor.fail.clear()
    parent_id = unique("parent")
    created = await executions.create(LOGGING, execution_id=parent_id)
    child_id = invoked_child_id(parent_id, "kid", created.state.macrostep)
    assert host.seen == [(child_id, "child"), (parent_id, "parent")]


async def test_a_src_no_chart_name_can_be_is_refused_and_never_reaches_the_store(
    store: AsyncConnectionPool,
) -> None:
    executions = mailbox_executions(store)
    longest = "n" * 1024  # MAX_IDENTITY_LENGTH: still a name
    dynamic = statifier.compile(
        f"""<scxml {NS} initial="s">
          <datamodel><data id="errors" expr="[]"/></datamodel>
          <state id="s">
            <invoke id="long" type="scxml" srcexpr="'{longest}' + 'x'"/>
            <invoke id="edge" type="scxml" srcexpr="'{longest}'"/>
            <transition event="error.communication.invoke.*">
              <assign location="errors" expr="errors + [_event.data['message']]"/>
            </transition>
          </state>
        </scxml>"""
    )
    created = await executions.create(dynamic, execution_id=unique("parent"))
    first, second = created.state.datamodel["errors"]
    assert "src is 1025 characters: no chart name is longer than 1024" in first
    assert "no chart is registered under the name" in second  # 1024 is a name, unknown
    with pytest.raises(ChartUnusable, match="src is 1025 characters"):
        await executions.register(invoking(longest + "x"))


async def test_child_charts_call_the_host_functions_of_the_executions(
    store: AsyncConnectionPool,
) -> None:
    functions = {"double": lambda n: 2 * n}
    executions = Executions(store, executor=MailboxTableExecutor(), functions=functions)
    name = unique("doubler")
    by_src = statifier.compile(
        f"""<scxml {NS} initial="f"><final id="f">
          <donedata><param name="answer" expr="double(21)"/></donedata>
        </final></scxml>""",
        name=name,
        functions=functions,
    )
    await executions.register(by_src)
    inline = chart(
        """
        <datamodel><data id="answer" expr="None"/></datamodel>
        <state id="s">
          <invoke id="kid" type="scxml"><content>
            <scxml xmlns="http://www.w3.org/2005/07/scxml" initial="f">
              <final id="f"><donedata><param name="answer" expr="double(4)"/></donedata></final>
            </scxml>
          </content></invoke>
          <transition event="done.invoke.kid" target="got">
            <assign location="answer" expr="_event.data['answer']"/>
          </transition>
        </state>
        <state id="got"/>
        """
    )
    first, second = unique("parent"), unique("parent")
    await executions.create(inline, execution_id=first)
    await executions.create(invoking(name), execution_id=second)
    assert await answers_of(executions, first) == 8
    assert await answers_of(executions, second) == 42
    # Without the functions, the inline child does not start: its parent hears why.
    bare = mailbox_executions(store)
    third = unique("parent")
    created = await bare.create(inline, execution_id=third)
    errors = [e for e in created.effects if isinstance(e, ErrorRaised)]
    assert [e.name for e in errors] == ["error.communication.invoke.kid"]
    assert "double" in errors[0].message


async def test_a_childs_creation_messages_and_cancel_are_in_the_history(
    store: AsyncConnectionPool,
) -> None:
    executions = mailbox_executions(store)

    async def kinds(execution_id: str) -> list[tuple[Any, ...]]:
        page = await executions.history(execution_id)
        return [
            (e.kind, e.trigger.source, e.key, e.event.name if e.event else None)
            for e in page.entries
        ]

    parent_id = unique("parent")
    created = await executions.create(PARENT, execution_id=parent_id)
    child_id = invoked_child_id(parent_id, "kid", created.state.macrostep)
    await executions.receive(parent_id, key="job:41")  # hello: the parent sends go
    await executions.receive(child_id, key="job:42")  # go: the child finishes
    assert await kinds(child_id) == [
        ("created", "parent", None, None),
        ("event", "parent", "job:42", "go"),
    ]
    assert await kinds(parent_id) == [
        ("created", "api", None, None),
        ("event", "invocation", "job:41", "hello"),  # the child's message, keyed by its job
    ]

    left = unique("parent")
    created = await executions.create(PARENT, execution_id=left)
    cancelled = invoked_child_id(left, "kid", created.state.macrostep)
    await executions.step(left, Event(name="leave"))
    await pump(executions, left)
    assert await kinds(cancelled) == [
        ("created", "parent", None, None),
        ("cancelled", "parent", f"deliver:{await last_delivery(store, cancelled)}", None),
    ]
    entries = (await executions.history(left)).entries
    assert [e.invocations_cancelled for e in entries] == [(), ("kid",)]


async def last_delivery(store: AsyncConnectionPool, receiver: str) -> int:
    """The id of the last ``deliver`` row of ``receiver`` (its key in ``pump``)."""
    (row,) = await rows(
        store, "SELECT max(id) FROM test_effects WHERE kind = 'deliver' AND execution_id = %s",
        receiver,
    )  # fmt: skip
    return int(row[0])
