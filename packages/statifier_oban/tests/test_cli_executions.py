"""``statifier-oban executions ...`` and the standalone ``statifier-oban worker`` delivering
into durable executions, against a real PostgreSQL.

The operator commands run in-process (``cli.main`` in a thread: it runs its own event
loop). The worker runs as a subprocess with no host module at all: the chart is in the
registry, which is all a standalone worker needs.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import statifier
from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier.cli import kit
from statifier_oban.cli import _main as cli
from statifier_oban.executions import ObanExecutor, execution_config
from statifier_persistence import Executions, invoked_child_id

from oban_support.cli import executions_on, run_cli
from oban_support.common import wait_until
from oban_support.processes import Lines

CARD = statifier.compile(
    """<scxml xmlns="http://www.w3.org/2005/07/scxml" name="card" initial="authorized">
  <datamodel><data id="captures" expr="0"/></datamodel>
  <state id="authorized">
    <onentry><send id="hold" event="authorization.expired" delayexpr="hold"/></onentry>
    <onexit><cancel sendid="hold"/></onexit>
    <transition event="capture.requested" target="capturing"/>
    <transition event="authorization.expired" target="expired"/>
  </state>
  <state id="capturing">
    <onentry><assign location="captures" expr="captures + 1"/></onentry>
    <transition event="capture.succeeded" target="settled"/>
  </state>
  <final id="settled"/>
  <final id="expired"/>
</scxml>"""
)


def unique(kind: str) -> str:
    """An execution id no other test uses."""
    return f"{kind}_{uuid.uuid4().hex[:10]}"


async def test_operators_list_show_send_and_cancel(
    pool: AsyncConnectionPool,
    oban_client: Oban,
    database_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    executions = await executions_on(pool, oban_client)
    first, second = unique("card_a"), unique("card_b")
    await executions.create(
        CARD, execution_id=first, datamodel={"hold": "1h"}, metadata={"customer": "c1"}
    )
    await executions.create(CARD, execution_id=second, datamodel={"hold": "1h"})
    url = ["--database-url", database_url]

    assert await run_cli("executions", "list", *url) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[0] == "id\tstatus\tchart\tsteps\tupdated"
    assert sorted(line.split("\t")[:4] for line in listed[1:]) == sorted(
        [[first, "active", "card", "1"], [second, "active", "card", "1"]]
    )
    assert await run_cli("executions", "list", *url, "--metadata", '{"customer": "c1"}') == 0
    assert [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()[1:]] == [first]
    assert await run_cli("executions", "list", *url, "--limit", "1") == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 2
    assert captured.err.startswith("more: --after ")

    assert await run_cli("executions", "show", *url, first) == 0
    shown = dict(
        line.split(None, 1) for line in capsys.readouterr().out.splitlines() if " " in line
    )
    assert shown["status"] == "active"
    assert shown["configuration"] == "authorized"
    assert shown["datamodel"] == '{"captures": 0, "hold": "1h"}'
    assert shown["metadata"] == '{"customer": "c1"}'
    assert shown["timer"].startswith("hold -> authorization.expired due ")
    assert "scheduled" in shown["timer"]

    send = ("executions", "send", *url, first, "capture.requested", "--key", "req-1")
    assert await run_cli(*send) == 0
    assert capsys.readouterr().out == f"stepped: {first} is active in capturing\n"
    assert await run_cli(*send) == 0
    assert (
        capsys.readouterr().out == f"already applied: key 'req-1' was applied to {first} before\n"
    )
    assert await run_cli("executions", "show", *url, first) == 0
    out = capsys.readouterr().out
    assert "configuration  capturing" in out
    assert "timer" not in out
    assert '"captures": 1' in out

    assert await run_cli("executions", "cancel", *url, second) == 0
    assert capsys.readouterr().out.startswith(f"cancelled: {second} is cancelled")
    assert await run_cli("executions", "cancel", *url, second) == 1
    assert capsys.readouterr().err == f"discarded: {second} is cancelled\n"

    assert await run_cli("executions", "show", *url, "no_such_card") == 1
    err = capsys.readouterr().err
    assert err == "statifier-oban executions show: error: no execution 'no_such_card'\n"


SHARED = statifier.compile(
    """<scxml xmlns="http://www.w3.org/2005/07/scxml" datamodel="ecmascript" initial="a">
  <datamodel><data id="o" expr="({k: 1})"/><data id="p" expr="o"/></datamodel>
  <state id="a"><transition event="loop"><assign location="o.self" expr="o"/></transition></state>
</scxml>"""
)


async def test_show_prints_an_ecmascript_charts_variables_as_plain_data(
    pool: AsyncConnectionPool,
    oban_client: Oban,
    database_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The position keeps o and p as one object ({"$ref": 0} and #objects); an operator
    # reads them as the data they are, a cycle as the documented marker.
    executions = await executions_on(pool, oban_client)
    execution_id = unique("shared")
    await executions.create(SHARED, execution_id=execution_id)
    url = ["--database-url", database_url]
    assert await run_cli("executions", "show", *url, execution_id) == 0
    shown = dict(
        line.split(None, 1) for line in capsys.readouterr().out.splitlines() if " " in line
    )
    assert shown["datamodel"] == '{"o": {"k": 1}, "p": {"k": 1}}'
    assert await run_cli("executions", "send", *url, execution_id, "loop") == 0
    capsys.readouterr()
    assert await run_cli("executions", "show", *url, execution_id, "--json") == 0
    record = json.loads(capsys.readouterr().out)
    circular = {"k": 1, "self": "[Circular]"}
    assert record["datamodel"] == {"o": circular, "p": circular}


TREE = statifier.compile(
    """<scxml xmlns="http://www.w3.org/2005/07/scxml" name="tree" initial="run">
  <state id="run">
    <invoke id="left" type="scxml"><content>
      <scxml xmlns="http://www.w3.org/2005/07/scxml" name="leaf" initial="w"><state id="w"/></scxml>
    </content></invoke>
    <invoke id="right" type="scxml"><content>
      <scxml xmlns="http://www.w3.org/2005/07/scxml" name="leaf" initial="w"><state id="w"/></scxml>
    </content></invoke>
  </state>
</scxml>"""
)


async def test_operators_see_the_tree_of_invoked_charts(
    pool: AsyncConnectionPool,
    oban_client: Oban,
    database_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    executions = await executions_on(pool, oban_client)
    top = unique("tree")
    created = await executions.create(TREE, execution_id=top)
    children = {
        invoke_id: invoked_child_id(top, invoke_id, created.state.macrostep)
        for invoke_id in ("left", "right")
    }
    url = ["--database-url", database_url]
    assert await run_cli("executions", "list", *url, "--parent", top) == 0
    listed = capsys.readouterr().out.splitlines()
    assert sorted(line.split("\t")[:3] for line in listed[1:]) == sorted(
        [[child, "active", "leaf"] for child in children.values()]
    )
    assert await run_cli("executions", "list", *url, "--parent", children["left"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == []
    assert await run_cli("executions", "show", *url, top) == 0
    out = capsys.readouterr().out.splitlines()
    shown = sorted(line.split(None, 1)[1] for line in out if line.startswith("child "))
    assert shown == sorted(
        f"{child} active, invoke {invoke_id}, chart leaf" for invoke_id, child in children.items()
    )
    assert await run_cli("executions", "show", *url, "--json", children["left"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["parent"] == {"execution_id": top, "invoke_id": "left", "index": None}
    assert record["children"] == []
    assert await run_cli("executions", "show", *url, "--json", top) == 0
    record = json.loads(capsys.readouterr().out)
    assert sorted(child["id"] for child in record["children"]) == sorted(children.values())
    assert {child["chart"]["name"] for child in record["children"]} == {"leaf"}


def test_executions_commands_refuse_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["executions", "list", "--database-url", "x", "--status", "running"]) == 2
    send = ["executions", "send", "--database-url", "x", "id", "e", "--data"]
    assert cli.main([*send, "{nope"]) == 2
    assert "not JSON" in capsys.readouterr().err
    # Every JSON argument is bounded: deep nesting is one line, never a RecursionError.
    for argv in ([*send, "[" * 10_000], ["executions", "list", "--database-url", "x",
                                          "--metadata", '{"a":' * 10_000]):  # fmt: skip
        assert cli.main(argv) == 2
        first, hint = capsys.readouterr().err.splitlines()
        assert first.endswith("JSON nested more than 256 levels deep")
        assert hint.startswith("Try 'statifier-oban executions ")


async def test_a_standalone_worker_fires_timers_into_executions(
    pool: AsyncConnectionPool, oban_client: Oban, database_url: str, tmp_path: Path
) -> None:
    executions = await executions_on(pool, oban_client)
    expiring, captured = unique("expiring"), unique("captured")
    await executions.create(CARD, execution_id=expiring, datamodel={"hold": "300ms"})
    await executions.create(CARD, execution_id=captured, datamodel={"hold": "300ms"})
    await executions.step(captured, statifier.Event(name="capture.requested"))
    environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments, no shell
        [sys.executable, "-m", "statifier_oban.cli", "worker", "--database-url", database_url,
         "--queue", "timers=5", "--rescue-after", "30"],
        cwd=tmp_path, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    lines = Lines(process)
    try:
        lines.wait_for("delivering into durable executions")
        lines.wait_for("running queues timers=5")

        async def expired() -> bool:
            return (await executions.get(expiring)).status == "completed"

        await wait_until(expired, timeout=20, what="the hold expiring")
        _, state = await executions.load(expiring)
        assert state.datamodel["captures"] == 0  # completed without a capture: expired
        _, state = await executions.load(captured)
        assert state.active_leaf_ids() == ("capturing",)  # its hold was cancelled
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
        assert any("stopped" in line for line in lines.rest())
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


CAPTURING = statifier.compile(
    """<scxml xmlns="http://www.w3.org/2005/07/scxml" name="capture" initial="authorized">
  <state id="authorized"><transition event="capture.requested" target="capturing"/></state>
  <state id="capturing">
    <invoke id="capture" type="test:echo"/>
    <transition event="done.invoke.capture" target="settled"/>
    <transition event="error.*" target="needs_attention"/>
  </state>
  <state id="needs_attention"/>
  <final id="settled"/>
</scxml>"""
)


async def test_send_refuses_a_chart_whose_invocations_it_could_not_start(
    pool: AsyncConnectionPool,
    oban_client: Oban,
    database_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Without the workers' --handler options, a step entering `capturing` would commit a
    # chart error (the invoke type is not registered here) and no job: the capture would
    # never run. The command refuses instead, and says which options it needs.
    executions = await executions_on(pool, oban_client)
    execution_id = unique("capture")
    await executions.create(CAPTURING, execution_id=execution_id)
    url = ["--database-url", database_url]

    assert await run_cli("executions", "send", *url, execution_id, "capture.requested") == 1
    err = capsys.readouterr().err
    assert "'test:echo'" in err
    assert "--handler" in err
    _, state = await executions.load(execution_id)
    assert state.configuration_ids() == ("authorized",)

    handler = ["--handler", "test:echo=oban_support.executions:EchoHandler"]
    queue = ["--invoke-queue", "invokes"]
    sent = await run_cli("executions", "send", *url, *handler, *queue, execution_id,
                         "capture.requested")  # fmt: skip
    assert sent == 0, capsys.readouterr().err
    _, state = await executions.load(execution_id)
    assert state.configuration_ids() == ("capturing",)
    assert state.live_invocations().keys() == {"capture"}


RULES_MODULE = """
def over_limit(amount):
    return amount > 100


FUNCTIONS = {"over_limit": over_limit}
"""

RULES_CHART = """<scxml xmlns="http://www.w3.org/2005/07/scxml" name="rules" initial="open">
  <state id="open">
    <transition event="charge" cond="over_limit(_event.data)" target="review"/>
  </state>
  <state id="review"/>
</scxml>"""


async def test_executions_commands_compile_charts_with_the_host_functions_they_are_given(
    pool: AsyncConnectionPool,
    oban_client: Oban,
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A chart calling a host function runs wherever --functions names the same mapping
    # (a worker takes the option too); without it the chart is refused, not run wrongly.
    module = f"rules_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(RULES_MODULE)
    chart_file = tmp_path / "rules.scxml"
    chart_file.write_text(RULES_CHART)
    monkeypatch.syspath_prepend(str(tmp_path))
    url = ["--database-url", database_url]
    functions = ["--functions", f"{module}:FUNCTIONS"]

    assert await run_cli("executions", "register", *url, str(chart_file)) == 1
    assert "over_limit" in capsys.readouterr().err
    assert await run_cli("executions", "register", *url, str(chart_file), *functions) == 0
    identity = capsys.readouterr().out.removeprefix("registered: ").strip()

    rules = importlib.import_module(module).FUNCTIONS
    machine = statifier.compile(RULES_CHART, functions=rules)
    assert machine.identity == identity
    config = execution_config(oban_client, timers_queue="timers")
    executions = Executions(pool, executor=ObanExecutor(config), functions=rules)
    execution_id = unique("rules")
    await executions.create(machine, execution_id=execution_id)

    send = ("executions", "send", *url, execution_id, "charge", "--data", "500")
    assert await run_cli(*send) == 1
    assert "over_limit" in capsys.readouterr().err
    assert await run_cli(*send, *functions) == 0
    assert capsys.readouterr().out == f"stepped: {execution_id} is active in review\n"
    bad = ["--functions", f"{module}:MISSING"]
    assert await run_cli(*send, *bad) == 1
    assert "'MISSING' is not a mapping of functions" in capsys.readouterr().err


def test_functions_are_imported_without_putting_the_working_directory_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker leaves the working directory off sys.path (ADR 13); naming host
    # functions must not put it back for every import that follows.
    module = f"rules_{uuid.uuid4().hex[:8]}"
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / f"{module}.py").write_text(RULES_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", *sys.path])
    kit.set_import_path(["plugins"])  # what the worker's --path does
    functions = kit.load_functions(f"{module}:FUNCTIONS")
    assert functions is not None
    assert list(functions) == ["over_limit"]
    assert "" not in sys.path
    assert str(tmp_path) not in sys.path


WITHOUT_PERSISTENCE = """
import sys

class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "statifier_persistence":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, NotInstalled())
from statifier_oban.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize(
    "argv",
    [
        ["executions", "list"],
        ["executions", "--help"],
        ["worker", "--database-url", "dbname=x", "--queue", "t=1", "--handler", "a:b=m:C"],
    ],
)
def test_without_persistence_the_commands_name_the_extra(argv: list[str]) -> None:
    done = subprocess.run(  # noqa: S603 - this interpreter, a fixed program
        [sys.executable, "-c", WITHOUT_PERSISTENCE, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"statifier-oban {argv[0]}: error: ")
    assert line.endswith("statifier_persistence: pip install 'statifier-oban[persistence]'")
