"""The W3C invoke tests (spec 6.4) as durable executions, with real jobs and a real worker.

Every case listed in ``tests/w3c/passing_durable_invoke.txt`` (the invoke section of the
Python profile's ratchet, as the live sessions run it) is created as an execution of an
``Executions`` whose ``ObanExecutor`` runs on a server-mode Oban in this process: its
delayed sends are timer jobs that fire after their real delays, its ``<invoke
type="scxml">`` children are executions started in its steps, and every event between
parent and child is a message delivered by a job. A ``src="file:testNNNsubN.scxml"``
names a registered chart: the case's sub-documents are registered under those names
first. The cases run at once, so the set takes about as long as its slowest case; each
must end ``completed`` in ``pass``. The list only grows.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import statifier
from statifier_persistence import Executions

from oban_support.common import database_fixture
from oban_support.executions import running_rig
from oban_support.harness import Servers, servers_fixture
from tools.w3c.corpus import corpus_dir, require_corpus
from tools.w3c.manifest import cases_by_id
from tools.w3c.passing import DURABLE_INVOKE_FILE, PASSING_FILE, read_passing
from tools.w3c.resolver import make_resolver
from tools.w3c.transform import transform_file

require_corpus()

INVOKE_SECTION = "6.4"
DEADLINE_S = 20.0
SUBDOCUMENT = re.compile(r"file:(?:\./)?test\d+sub\d+\.scxml")

database = database_fixture()
servers = servers_fixture()


def listed() -> list[str]:
    """The ids in the durable ratchet."""
    return read_passing(DURABLE_INVOKE_FILE)


def test_the_durable_ratchet_lists_invoke_tests_the_engine_passes() -> None:
    ids = listed()
    assert len(ids) == len(set(ids)), "an id is listed twice"
    cases = cases_by_id()
    engine = set(read_passing(PASSING_FILE))
    for case_id in ids:
        assert cases[case_id].specnum == INVOKE_SECTION, f"{case_id} is no invoke test"
        assert case_id in engine, f"{case_id} is not in the engine's ratchet"


async def _run(executions: Executions, case_id: str, start: str) -> tuple[str, str, Any]:
    directory = corpus_dir()
    resolve = make_resolver(directory)
    source = transform_file(directory / start)
    for src in sorted(set(SUBDOCUMENT.findall(source))):
        await executions.register(statifier.compile(resolve(src), name=src))
    machine = statifier.compile(source)
    execution_id = f"w3c_{case_id}_{start.removesuffix('.txml')}"
    await executions.create(machine, execution_id=execution_id)
    deadline = asyncio.get_running_loop().time() + DEADLINE_S
    while asyncio.get_running_loop().time() < deadline:
        execution = await executions.get(execution_id)
        if execution.status != "active":
            break
        await asyncio.sleep(0.1)
    ended = (execution.outcome or {}).get("configuration", [])
    return start, execution.status, ended


async def test_the_invoke_tests_pass_as_durable_executions(servers: Servers) -> None:
    cases = cases_by_id()
    runs = [(case_id, start) for case_id in listed() for start in cases[case_id].starts]
    assert len(runs) >= 25, "the durable invoke ratchet is unexpectedly small"
    async with running_rig(servers) as rig:
        results = await asyncio.gather(
            *(_run(rig.executions, case_id, start) for case_id, start in runs)
        )
    failed = [
        (start, status, configuration)
        for start, status, configuration in results
        if status != "completed" or "pass" not in configuration
    ]
    assert not failed, f"durable executions failed: {failed}"
