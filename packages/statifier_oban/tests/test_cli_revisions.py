"""``statifier-oban executions revisions|register|migrate|park|unpark|retire`` against a real
PostgreSQL, and a standalone worker firing the old revision's timer into a migrated
execution.

The commands run in-process (``cli.main`` in a thread); the worker is a subprocess with
no host module: it compiles the new revision from the registry.
"""

from __future__ import annotations

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
from statifier.core.events import Event
from statifier_oban.cli import _main as cli
from statifier_oban.executions import ObanExecutor, execution_config
from statifier_persistence import Executions

from oban_support.cli import run_cli
from oban_support.common import wait_until
from oban_support.processes import Lines

HOLD = """<scxml xmlns="http://www.w3.org/2005/07/scxml" name="pickup_hold" initial="on_hold">
  <state id="on_hold">
    <onentry><send id="pickup" event="pickup.expired" delayexpr="window"/></onentry>
    <onexit><cancel sendid="pickup"/></onexit>
    <transition event="pickup.expired" target="returned_to_shelf"/>
    <transition event="review" target="reviewing"/>
  </state>
  <state id="reviewing"/>
  <final id="returned_to_shelf"/>
</scxml>
"""

V2 = HOLD.replace('"on_hold"', '"awaiting_pickup"').replace('"reviewing"', '"in_review"')


def unique(kind: str) -> str:
    """A name no other test uses."""
    return f"{kind}_{uuid.uuid4().hex[:10]}"


async def test_operators_migrate_a_revision_and_retire_the_old_one(
    pool: AsyncConnectionPool,
    oban_client: Oban,
    database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = execution_config(oban_client, timers_queue="timers")
    executions = Executions(pool, executor=ObanExecutor(config))
    v1 = statifier.compile(HOLD, version="1")
    moving, stuck = sorted([unique("hold"), unique("hold")])
    await executions.create(v1, execution_id=moving, datamodel={"window": "2s"})
    await executions.create(v1, execution_id=stuck, datamodel={"window": "1h"})
    await executions.step(stuck, Event(name="review"))
    url = ["--database-url", database_url]
    (tmp_path / "v2.scxml").write_text(V2)

    assert (
        await run_cli("executions", "register", *url, str(tmp_path / "v2.scxml"), "--version", "2")
        == 0
    )
    v2_identity = capsys.readouterr().out.removeprefix("registered: ").strip()
    assert v2_identity == statifier.compile(V2, version="2").identity

    assert await run_cli("executions", "revisions", *url, "--chart", "pickup_hold") == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert rows[0] == ["identity", "name", "version", "registered", "retired", "executions"]
    assert [(r[0], r[2], r[4], r[5]) for r in rows[1:]] == [
        (v1.identity, "1", "-", "active=2"),
        (v2_identity, "2", "-", "-"),
    ]

    migrate = ("executions", "migrate", *url, "--to", v2_identity[:24], "--revision", v1.identity)
    mapped = ("--map", "on_hold=awaiting_pickup")
    assert await run_cli(*migrate, *mapped, "--dry-run") == 1
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == f"would move: {moving}"
    assert out.splitlines()[1].startswith(f"refused: {stuck}: states no longer in the chart")
    assert "reviewing" in out.splitlines()[1]
    assert err == "1 would move, 1 refused\n"
    assert (await executions.get(moving)).chart_identity == v1.identity  # a dry run

    assert await run_cli(*migrate, *mapped) == 1
    assert capsys.readouterr().out.splitlines()[0] == f"moved: {moving}"
    assert (await executions.get(moving)).chart_identity == v2_identity
    for revision, ids in ((v2_identity[:24], [moving]), (v1.identity, [stuck])):
        assert await run_cli("executions", "list", *url, "--revision", revision) == 0
        listed = capsys.readouterr().out.splitlines()[1:]
        assert [line.split("\t")[0] for line in listed] == ids

    retire = ("executions", "retire", *url, v1.identity)
    assert await run_cli(*retire, "--dry-run") == 1
    out, err = capsys.readouterr()
    assert json.loads(out) == {
        "executions": {"active": 1, "needs_migration": 0},
        "fan_outs": {"open": 0},
        "invoked_by": {"revisions": 0},
        "timers": {"timers": 0},  # its pickup timer was cancelled on the way to review
    }
    assert err == "would be refused: executions: active=1\n"

    assert await run_cli("executions", "park", *url, "--revision", v1.identity) == 0
    assert capsys.readouterr().out == f"parked: {stuck}\n"
    assert await run_cli("executions", "unpark", *url, stuck, "--dry-run") == 0
    assert capsys.readouterr().out == f"would unpark: {stuck}\n"
    assert await run_cli("executions", "unpark", *url, stuck) == 0
    assert capsys.readouterr().out == f"unparked: {stuck}\n"
    assert await run_cli("executions", "unpark", *url, stuck, "--dry-run") == 1
    refusal = capsys.readouterr().out
    assert refusal == f"refused: {stuck}: execution '{stuck}' is active: it cannot become active\n"
    assert await run_cli("executions", "unpark", *url, stuck) == 1
    assert capsys.readouterr().out == refusal

    mapped_both = (*mapped, "--map", "reviewing=in_review")
    assert (
        await run_cli("executions", "migrate", *url, "--to", v2_identity, *mapped_both, stuck) == 0
    )
    assert capsys.readouterr().out == f"moved: {stuck}\n"
    assert await run_cli(*retire) == 0
    assert capsys.readouterr().out == f"retired: {v1.identity}\n"
    assert await run_cli(*retire) == 0  # retired already
    await fires_into_the_migrated_execution(executions, moving, v2_identity, database_url, tmp_path)


async def fires_into_the_migrated_execution(
    executions: Executions, execution_id: str, identity: str, database_url: str, cwd: Path
) -> None:
    """A standalone worker fires the pickup timer the first revision armed into the
    execution now on the second revision."""
    environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(  # noqa: S603 - our interpreter and CLI, fixed arguments
        [sys.executable, "-m", "statifier_oban.cli", "worker", "--database-url", database_url,
         "--queue", "timers=5"],
        cwd=cwd, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    lines = Lines(process)
    try:
        lines.wait_for("running queues timers=5")

        async def completed() -> bool:
            return (await executions.get(execution_id)).status == "completed"

        await wait_until(completed, timeout=20, what="the pickup timer firing")
        execution = await executions.get(execution_id)
        assert execution.chart_identity == identity
        assert execution.outcome is not None
        assert execution.outcome["configuration"] == ["returned_to_shelf"]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def test_revision_commands_refuse_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["executions", "migrate", "--database-url", "x", "--to", "r", "--map", "a"]
    assert cli.main(argv) == 2
    assert "expected OLD=NEW" in capsys.readouterr().err


async def test_a_revision_is_named_by_a_unique_prefix_only(
    pool: AsyncConnectionPool,
    oban_client: Oban,
    database_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    executions = Executions(
        pool, executor=ObanExecutor(execution_config(oban_client, timers_queue="timers"))
    )
    await executions.register(statifier.compile(HOLD, version="a"))
    await executions.register(statifier.compile(HOLD, version="b"))
    url = ["--database-url", database_url]
    assert await run_cli("executions", "park", *url, "--revision", "scxml-c1:") == 1
    assert "names 2 revisions" in capsys.readouterr().err
    assert await run_cli("executions", "retire", *url, "nothing-like-it") == 1
    assert "no chart revision 'nothing-like-it'" in capsys.readouterr().err
    assert await run_cli("executions", "park", *url) == 1
    assert "give either --revision" in capsys.readouterr().err


def test_register_reads_no_more_of_a_file_than_a_chart_may_hold(database_url: str) -> None:
    # An endless file (or a 10 GB log named by mistake) is refused after the registry's
    # bound, not read into memory. The child's memory is capped: reading on fails fast.
    probe = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "from statifier_oban.cli import _main as cli\n"
        "sys.exit(cli.main(sys.argv[1:]))\n"
    )
    argv = ["executions", "register", "--database-url", database_url, "/dev/zero"]
    try:
        result = subprocess.run(  # noqa: S603 - this interpreter, fixed arguments, no shell
            [sys.executable, "-c", probe, *argv],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("register kept reading /dev/zero")
    assert result.returncode == 1, result.stderr[-2000:]
    assert "over the" in result.stderr
