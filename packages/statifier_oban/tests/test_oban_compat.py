"""Each oban internal that ``statifier_oban._oban_compat`` reaches, on the installed oban.

Run these first when oban is upgraded: each test pins one item of the module's docstring.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier_oban import _oban_compat, latency

from oban_support.common import forget_instance, unique

SOURCE = Path(_oban_compat.__file__).parent

OBAN_PRIVATE_ATTRIBUTES = {
    "_query",
    "_prefix",
    "_pool",
    "_producers",
    "_interval",
    "_notifier",
    "_stopping",
    "_running_jobs",
    "_uuid",
    "_limit",
    "_name",
    "_instances",
}
"""Private attributes of oban objects that only the compat module may read."""


def test_only_the_compat_module_imports_or_reads_oban_internals() -> None:
    offenders = []
    for path in sorted(SOURCE.rglob("*.py")):
        if path.name == "_oban_compat.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("oban"):
                module = node.module or ""
                names = [alias.name for alias in node.names]
                if module.startswith("oban._") or any(n.startswith("_") for n in names):
                    offenders.append(f"{path.name}: from {node.module} import {names}")
            if isinstance(node, ast.Import) and any(
                a.name.startswith("oban._") for a in node.names
            ):
                offenders.append(f"{path.name}:{node.lineno}: import oban._...")
            if isinstance(node, ast.Attribute) and node.attr in OBAN_PRIVATE_ATTRIBUTES:
                offenders.append(f"{path.name}:{node.lineno}: .{node.attr}")
    assert offenders == []


async def test_the_pool_and_prefix_are_the_ones_oban_was_built_with(
    pool: AsyncConnectionPool,
) -> None:
    oban = Oban(pool=pool, name=unique("compat"), prefix="tenant_x")
    try:
        assert _oban_compat.pool_of(oban) is pool
        assert _oban_compat.prefix_of(oban) == "tenant_x"
    finally:
        forget_instance(oban)


async def test_importing_the_package_makes_oban_build_the_prompt_stager(
    oban_client: Oban,
) -> None:
    assert latency.installed()
    stager = _oban_compat.stager_of(oban_client)
    assert isinstance(stager, latency.PromptStager)
    assert _oban_compat.interval_of(stager) == latency.DEFAULT_INTERVAL_S


async def test_uninstalling_gives_obans_own_stager_back(start_oban: Any) -> None:
    try:
        latency.uninstall()
        assert not latency.installed()
        stock = await start_oban({"q": 1}, stager={})
        assert type(_oban_compat.stager_of(stock)).__name__ == "Stager"
        assert _oban_compat.interval_of(_oban_compat.stager_of(stock)) == 1.0
    finally:
        latency.install()
    prompt = await start_oban({"q": 1})
    assert isinstance(_oban_compat.stager_of(prompt), latency.PromptStager)


def test_importing_the_package_installs_our_acks_and_fetch_and_uninstall_restores_obans() -> None:
    from oban._extensions import get_ext
    from oban._producer import _get_jobs
    from oban._query import _ack_jobs
    from statifier_oban import _acks, _fetch

    assert _oban_compat.ack_writer() is _acks.write
    assert _oban_compat.job_fetcher() is _fetch.fetch
    try:
        latency.uninstall()
        assert _oban_compat.ack_writer() is None
        assert _oban_compat.job_fetcher() is None
        assert get_ext(_oban_compat.ACK_HOOK, print) is _ack_jobs
        assert get_ext(_oban_compat.FETCH_HOOK, print) is _get_jobs
    finally:
        latency.install()
    assert latency.installed()


def test_telemetry_handled_sees_the_handlers_attached_to_an_event() -> None:
    from oban import telemetry as oban_telemetry

    name = unique("compat.event")
    assert not _oban_compat.telemetry_handled(name)
    oban_telemetry.attach(name, [name], lambda _name, _meta: None)
    try:
        assert _oban_compat.telemetry_handled(name)
    finally:
        oban_telemetry.detach(name)
    assert not _oban_compat.telemetry_handled(name)


async def test_the_stager_bridge_caps_its_interval_and_knows_its_queues(start_oban: Any) -> None:
    server = await start_oban({"compat_q": 1}, stager={"interval": 5.0})
    stager = _oban_compat.stager_of(server)
    assert isinstance(stager, latency.PromptStager)
    assert stager.interval == latency.ANNOUNCE_HORIZON_S  # 5 s capped at the horizon
    assert stager.runs("compat_q")
    assert not stager.runs("other")
    assert not stager.runs(None)


async def test_run_job_runs_a_fetched_job_through_obans_executor_and_our_ack(
    oban_client: Oban, pool: AsyncConnectionPool
) -> None:
    from statifier_oban import _fetch
    from statifier_oban.workers import TIMER_WORKER

    async with pool.connection() as conn:
        await conn.execute(
            "INSERT INTO oban_jobs (args, queue, worker, state) "
            "VALUES ('{}', 'compat_q', %s, 'available')",
            [TIMER_WORKER],
        )
    fetched = await _fetch.fetch(
        _oban_compat.FetchRequest(
            pool=pool, prefix="public", queue="compat_q", node="n", uuid="u", demand=1
        )
    )
    (job,) = fetched.jobs
    assert await _oban_compat.run_job(oban_client, job) == "cancelled"  # undecodable args
    async with pool.connection() as conn:
        row = await (
            await conn.execute("SELECT state::text, errors FROM oban_jobs WHERE id = %s", [job.id])
        ).fetchone()
    assert row is not None
    assert row[0] == "cancelled"
    assert "undecodable" in row[1][0]["error"]


def test_forget_instance_takes_an_oban_out_of_the_registry(pool: AsyncConnectionPool) -> None:
    name = unique("compat")
    oban = Oban(pool=pool, name=name)
    assert Oban.get_instance(name) is oban
    _oban_compat.forget_instance(oban)
    _oban_compat.forget_instance(oban)  # twice: no error
    with pytest.raises(RuntimeError, match=name):
        Oban.get_instance(name)
