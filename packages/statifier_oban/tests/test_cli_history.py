"""``statifier-oban executions start|send|history|wait|prune-history`` on a real PostgreSQL:
start by chart name, the unmatched-event notice (``--strict`` fails), history paged and
followed, waiting, and the ``--json`` shapes (the records of ``Execution.to_json`` and
``HistoryEntry.to_json``).

The commands run in-process (``cli.main`` in a thread: it runs its own event loop).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier.core.events import Event
from statifier_oban.cli import _main as cli
from statifier_oban.cli._executions import operator
from statifier_oban.executions import ObanExecutor, execution_config
from statifier_persistence import Executions, Trigger

from oban_support.common import unique, watched

ORDER = """<scxml xmlns="http://www.w3.org/2005/07/scxml" name="order" initial="open">
  <datamodel><data id="total" expr="0"/></datamodel>
  <state id="open">
    <onentry><send id="reminder" event="remind" delay="15m"/></onentry>
    <transition event="invoice.sent" target="invoiced">
      <assign location="total" expr="_event.data['amount'] if _event.data else 0"/>
    </transition>
  </state>
  <state id="invoiced">
    <onexit><cancel sendid="reminder"/></onexit>
    <transition event="paid" target="paid"/>
  </state>
  <final id="paid"/>
</scxml>"""


async def run_cli(*argv: str) -> int:
    """``statifier-oban ARGV`` in a thread (it runs its own event loop)."""
    return await asyncio.to_thread(cli.main, list(argv))


def json_lines(text: str) -> list[Any]:
    """Every line of ``text`` as JSON."""
    return [json.loads(line) for line in text.splitlines()]


@pytest.fixture
def chart_file(tmp_path: Path) -> Path:
    """The order chart in a file, for ``executions register``."""
    path = tmp_path / "order.scxml"
    path.write_text(ORDER)
    return path


async def register(database_url: str, chart_file: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """Register the order chart; its identity."""
    assert await run_cli("executions", "register", "--database-url", database_url,
                         str(chart_file)) == 0  # fmt: skip
    return capsys.readouterr().out.split()[-1]


def stepper(pool: AsyncConnectionPool, oban_client: Oban) -> Executions:
    """``Executions`` stepping from the test, as a host would (its timers on ``timers``)."""
    return Executions(
        pool, executor=ObanExecutor(execution_config(oban_client, timers_queue="timers"))
    )


async def started(database_url: str, chart_file: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """The id of an order started from the command line, its chart registered first."""
    await register(database_url, chart_file, capsys)
    order = unique("order")
    assert await run_cli("executions", "start", "--database-url", database_url, "order",
                         "--id", order) == 0  # fmt: skip
    capsys.readouterr()
    return order


async def test_start_by_name_send_with_a_notice_and_read_the_history(
    database_url: str, chart_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = ["--database-url", database_url]
    await register(database_url, chart_file, capsys)
    order = unique("order")
    assert await run_cli("executions", "start", *url, "order", "--id", order,
                         "--metadata", '{"customer": "c1"}') == 0  # fmt: skip
    assert capsys.readouterr().out == f"{order}\n"  # the id alone: ID=$(... start ...)

    typo = ("executions", "send", *url, order, "invoice.snt")
    assert await run_cli(*typo) == 0
    captured = capsys.readouterr()
    assert captured.out == f"stepped: {order} is active in open\n"
    assert captured.err == (
        "notice: no transition matched external event 'invoice.snt'; did you mean 'invoice.sent'?\n"
    )
    assert await run_cli(*typo, "--strict") == 1
    assert capsys.readouterr().err.endswith(
        "error: no transition matched external event 'invoice.snt'; "
        "did you mean 'invoice.sent'? (--strict)\n"
    )
    sent = ("executions", "send", *url, order, "invoice.sent", "--data", '{"amount": 12}')
    assert await run_cli(*sent, "--strict") == 0
    assert capsys.readouterr() == (f"stepped: {order} is active in invoiced\n", "")

    assert await run_cli("executions", "history", *url, order) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert rows[0] == ["seq", "at", "kind", "trigger", "event", "states", "status", "did"]
    assert [row[0] for row in rows[1:]] == ["1", "2", "3", "4"]
    assert [row[2] for row in rows[1:]] == ["created", "event", "event", "event"]
    assert [row[3] for row in rows[1:]] == ["operator"] * 4
    assert rows[1][7] == "armed reminder (remind) in 15m; chart order"
    assert rows[2][7].startswith("no transition matched external event 'invoice.snt'")
    assert rows[4][4:7] == ["invoice.sent", "open -> invoiced", "active"]
    assert rows[1][1].endswith("Z")  # UTC ISO-8601, to the second

    assert await run_cli("executions", "history", *url, order, "--limit", "2") == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 3
    assert captured.err == "more: --after 2\n"
    assert await run_cli("executions", "history", *url, order, "--after", "2", "--json") == 0
    entries = json_lines(capsys.readouterr().out)
    assert [e["seq"] for e in entries] == [3, 4]
    assert entries[1]["event"] == {"name": "invoice.sent", "data": {"amount": 12},
                                   "data_clipped": False}  # fmt: skip
    assert entries[1]["trigger"] == {
        "source": "operator",
        "job_id": None,
        "detail": "statifier-oban executions send",
    }
    assert await run_cli("executions", "history", *url, order, "--last", "1", "--json") == 0
    assert [e["seq"] for e in json_lines(capsys.readouterr().out)] == [4]
    assert await run_cli("executions", "history", *url, "no_such_order") == 1
    assert capsys.readouterr().err.endswith("error: no execution 'no_such_order'\n")


async def test_every_executions_command_prints_the_records_with_json(
    database_url: str, chart_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = ["--database-url", database_url]
    identity = await register(database_url, chart_file, capsys)
    order = unique("order")
    assert await run_cli("executions", "start", *url, "order", "--id", order, "--revision",
                         identity[:30], "--event", "invoice.sent", "--json") == 0  # fmt: skip
    started = json.loads(capsys.readouterr().out)
    assert list(started) == [
        "result",
        "execution",
        "configuration",
        "transition_taken",
        "unmatched",
        "entries",
    ]
    assert started["result"] == "started"
    assert started["execution"]["id"] == order
    assert started["execution"]["chart"]["identity"] == identity
    assert started["execution"]["history_seq"] == 2  # created and stepped, one transaction
    assert started["configuration"] == ["invoiced"]
    assert [e["kind"] for e in started["entries"]] == ["created", "event"]

    assert await run_cli("executions", "list", *url, "--json") == 0
    listed = [r for r in json_lines(capsys.readouterr().out) if r["id"] == order]
    assert listed == [started["execution"]]  # the same record, the same shape

    assert await run_cli("executions", "show", *url, order, "--json") == 0
    shown = json.loads(capsys.readouterr().out)
    assert {k: v for k, v in shown.items() if k in started["execution"]} == started["execution"]
    assert shown["configuration"] == ["invoiced"]
    assert shown["timers"][0]["send_id"] == "reminder"

    assert await run_cli("executions", "send", *url, order, "paid", "--json") == 0
    answer = json.loads(capsys.readouterr().out)
    assert (answer["result"], answer["transition_taken"], answer["unmatched"]) == (
        "stepped",
        True,
        None,
    )
    assert answer["execution"]["status"] == "completed"
    assert answer["entry"]["seq"] == 3
    assert answer["entry"]["timers_cancelled"] == ["reminder"]

    assert await run_cli("executions", "wait", *url, order, "--status", "completed",
                         "--json") == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["execution"]["status"] == "completed"
    assert await run_cli("executions", "cancel", *url, order, "--json") == 1
    assert json.loads(capsys.readouterr().out)["result"] == "discarded"


async def test_control_characters_an_event_carries_print_escaped_and_exact_in_json(
    database_url: str, chart_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = ["--database-url", database_url]
    order = await started(database_url, chart_file, capsys)
    # An event name is any characters but whitespace: a window title (OSC ... BEL), a
    # screen clear (CSI 2J) and a C1 CSI moving the cursor up.
    name = "invoice.sent\x1b]0;owned\x07\x1b[2J\x9b1A"
    shown = "invoice.sent\\x1b]0;owned\\x07\\x1b[2J\\x9b1A"
    assert await run_cli("executions", "send", *url, order, name) == 0
    notice = capsys.readouterr().err
    assert not {"\x1b", "\x07", "\x9b"} & set(notice)

    assert await run_cli("executions", "history", *url, order) == 0
    out = capsys.readouterr().out
    assert not {"\x1b", "\x07", "\x9b"} & set(out)
    rows = [line.split("\t") for line in out.splitlines()]
    assert len(rows) == 3
    assert rows[2][4] == shown
    assert shown in rows[2][7]  # the unmatched notice quotes it

    assert await run_cli("executions", "history", *url, order, "--json") == 0
    entries = json_lines(capsys.readouterr().out)
    assert entries[1]["event"]["name"] == name


async def test_start_refuses_what_it_cannot_start(
    database_url: str, chart_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = ["--database-url", database_url]
    identity = await register(database_url, chart_file, capsys)
    assert await run_cli("executions", "start", *url, "no_such_chart") == 1
    assert capsys.readouterr().err.endswith("error: no chart 'no_such_chart' is registered\n")
    assert await run_cli("executions", "start", *url, "other", "--revision", identity) == 1
    assert capsys.readouterr().err.endswith(
        f"error: revision {identity} is of chart 'order', not 'other'\n"
    )
    assert await run_cli("executions", "start", *url, "order", "--data", "{}") == 2
    assert "give --event NAME too" in capsys.readouterr().err
    order = unique("order")
    start = ("executions", "start", *url, "order", "--id", order, "--event", "nope", "--strict")
    assert await run_cli(*start) == 1
    assert capsys.readouterr().err.endswith(
        "error: no transition matched external event 'nope'; "
        "the active states accept invoice.sent (--strict)\n"
    )
    # --strict reports, as for send: the execution was started and the event stepped
    assert await run_cli("executions", "show", *url, order) == 0
    assert "configuration  open" in capsys.readouterr().out


async def test_wait_is_woken_by_a_step_and_fails_in_one_line(
    database_url: str, pool: AsyncConnectionPool, oban_client: Oban,
    chart_file: Path, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    url = ["--database-url", database_url]
    order = await started(database_url, chart_file, capsys)
    executions = stepper(pool, oban_client)
    waiting = asyncio.create_task(
        run_cli("executions", "wait", *url, order, "--state", "invoiced", "--timeout", "20s")
    )
    await watched(pool, order)
    assert not waiting.done()
    await executions.step(order, Event(name="invoice.sent"))
    assert await asyncio.wait_for(waiting, 20) == 0
    assert capsys.readouterr().out == f"{order} is active\n"

    assert await run_cli("executions", "wait", *url, order, "--state", "paid",
                         "--timeout", "300ms") == 1  # fmt: skip
    assert capsys.readouterr().err == (
        "statifier-oban executions wait: error: execution "
        f"'{order}' did not reach state 'paid' within 0.3 s (it is active)\n"
    )
    assert await run_cli("executions", "wait", *url, order) == 2
    assert "wait for --state STATE, --status STATUS or both" in capsys.readouterr().err


async def test_history_follows_new_entries_until_the_execution_ends(
    database_url: str, pool: AsyncConnectionPool, oban_client: Oban,
    chart_file: Path, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    url = ["--database-url", database_url]
    order = await started(database_url, chart_file, capsys)
    executions = stepper(pool, oban_client)
    following = asyncio.create_task(
        run_cli("executions", "history", *url, order, "--follow", "--json", "--timeout", "30s")
    )
    await watched(pool, order)
    await executions.step(order, Event(name="invoice.sent"))
    await executions.step(order, Event(name="paid"))
    assert await asyncio.wait_for(following, 30) == 0  # ends: the execution completed
    followed = json_lines(capsys.readouterr().out)
    assert [(e["seq"], e["kind"], e["status"]) for e in followed] == [
        (1, "created", "active"),
        (2, "event", "active"),
        (3, "event", "completed"),
    ]
    assert followed[2]["trigger"] == {"source": "api", "job_id": None, "detail": None}
    assert await run_cli("executions", "history", *url, order, "--timeout", "1s") == 2
    assert "give --follow too" in capsys.readouterr().err


async def test_prune_history_keeps_what_retention_keeps(
    database_url: str, chart_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = ["--database-url", database_url]
    await register(database_url, chart_file, capsys)
    order = unique("order")
    assert await run_cli("executions", "start", *url, "order", "--id", order,
                         "--event", "invoice.sent") == 0  # fmt: skip
    for _ in range(3):
        assert await run_cli("executions", "send", *url, order, "noise") == 0
    capsys.readouterr()
    prune = ("executions", "prune-history", *url)
    assert await run_cli(*prune, "--keep-last", "2", "--batch-size", "1", "--json") == 0
    assert json.loads(capsys.readouterr().out) == {"deleted": 3}
    assert await run_cli("executions", "history", *url, order, "--json") == 0
    assert [e["seq"] for e in json_lines(capsys.readouterr().out)] == [4, 5]
    assert await run_cli(*prune, "--older-than", "1d") == 0
    assert capsys.readouterr().out == "deleted 0 history entries\n"
    assert await run_cli(*prune) == 2
    assert "give --keep-last N, --older-than DURATION or both" in capsys.readouterr().err


def test_operator_changes_are_recorded_as_the_operators() -> None:
    assert operator("send") == Trigger("operator", detail="statifier-oban executions send")
