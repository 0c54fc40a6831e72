"""Each oban internal that ``statifier_oban.store._oban_compat`` reaches, on the installed oban.

Run these first when oban is upgraded: each test pins one item of the module's docstring.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path
from typing import Any

import pytest
import statifier_oban
from oban import Oban
from oban import _notifier as oban_notifier
from oban import _producer as oban_producer
from oban import _query as oban_query
from oban import _stager as oban_stager
from oban._executor import AckAction
from oban.telemetry import core as oban_telemetry_core
from psycopg_pool import AsyncConnectionPool
from statifier_oban import latency
from statifier_oban.store import _oban_compat

from oban_support.common import forget_instance, unique

SOURCE = Path(statifier_oban.__file__).parent
"""The package's source, every subpackage included."""

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
    sources = sorted(SOURCE.rglob("*.py"))
    assert len(sources) > 30  # every subpackage is read
    for path in sources:
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
    from statifier_oban.store import _acks, _fetch

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
    from statifier_oban.store import _fetch
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


# -- one contract per patch ------------------------------------------------------------------
# Each test below pins what one patch of ``_oban_compat`` relies on in oban's internals, by
# name, so an oban release that moves any of it fails here with the patch named, before
# any timer is late. docs/contributing.md ("The oban seam") lists the public oban API
# each patch waits for.


def _calls_extension(function: Any, key: str) -> bool:
    """Whether oban's ``function`` hands its work to the extension ``key``."""
    return f'use_ext("{key}"' in inspect.getsource(function).replace("\n", "").replace(" ", "")


def _parameters(function: Any) -> list[str]:
    return list(inspect.signature(function).parameters)


def test_contract_pool_and_prefix(pool: AsyncConnectionPool) -> None:
    # pool_of / prefix_of: Oban keeps its Query as _query (pool in _pool) and _prefix.
    oban = Oban(pool=pool, name=unique("contract"), prefix="p")
    try:
        query = vars(oban)["_query"]
        assert isinstance(query, oban_query.Query), "patch pool/prefix: Oban._query moved"
        assert {"_pool", "_prefix"} <= set(vars(query)), "patch pool/prefix: Query fields"
        assert vars(oban)["_prefix"] == "p", "patch pool/prefix: Oban._prefix moved"
    finally:
        forget_instance(oban)


def test_contract_telemetry_handlers() -> None:
    # telemetry_handled: attach() files handlers per event name in core._handlers.
    handlers = vars(oban_telemetry_core)["_handlers"]
    assert isinstance(handlers, dict), "patch telemetry_handled: core._handlers moved"
    assert _parameters(oban_telemetry_core.attach)[:2] == ["id", "events"]


def test_contract_stager_build_hook() -> None:
    # stager_builder / set_stager_builder: Oban.__init__ builds its Stager through the
    # "stager.build" extension, with oban's build_stager as the default.
    assert _calls_extension(Oban.__init__, _oban_compat.STAGER_HOOK), "patch stager hook"
    assert _oban_compat.STAGER_HOOK == "stager.build"
    # Our builder takes oban's config and passes the keywords through to the Stager.
    assert _parameters(oban_stager.build_stager) == ["config", "notifier", "producers", "query"]


def test_contract_stager_bridge() -> None:
    # StagerBridge: subclasses oban's Stager and replaces its step and its loop.
    stager = oban_stager.Stager
    for name in ("_loop", "_stage", "_on_notification", "start", "stop"):
        assert inspect.iscoroutinefunction(vars(stager).get(name)), f"patch bridge: {name}"
    assert _parameters(stager._on_notification) == ["self", "channel", "payload"]
    init = inspect.getsource(stager.__init__)
    for field in ("_query", "_notifier", "_producers", "_interval", "_limit", "_stopping"):
        assert f"self.{field} =" in init, f"patch bridge: Stager.{field} moved"
    assert {"listen", "unlisten"} <= set(vars(oban_notifier.PostgresNotifier)), (
        "patch bridge: the notifier's listen/unlisten"
    )


async def test_contract_stager_and_interval_read(start_oban: Any) -> None:
    # stager_of / interval_of (checks only): Oban._stager, Stager._interval.
    server = await start_oban({"contract_q": 1})
    stager = vars(server)["_stager"]
    assert isinstance(stager, oban_stager.Stager), "patch stager_of: Oban._stager moved"
    assert isinstance(vars(stager)["_interval"], float), "patch interval_of"


def test_contract_ack_writer() -> None:
    # set_ack_writer: Query.ack_jobs hands a list of AckAction to "query.ack_jobs".
    assert _calls_extension(oban_query.Query.ack_jobs, _oban_compat.ACK_HOOK), "patch acks"
    assert _parameters(oban_query._ack_jobs) == ["query", "acks"]
    fields = {field.name for field in dataclasses.fields(AckAction)}
    assert {"job", "state", "attempt_change", "error", "meta", "schedule_in"} <= fields
    assert isinstance(vars(AckAction).get("id"), property), "patch acks: AckAction.id"
    assert isinstance(vars(AckAction).get("attempted_at"), property)


async def test_contract_job_fetcher(start_oban: Any) -> None:
    # set_job_fetcher: Producer._get_jobs hands the producer to "producer.get_jobs"; the
    # fetcher reads its limit, running jobs, queue, node, uuid and query.
    assert _calls_extension(oban_producer.Producer._get_jobs, _oban_compat.FETCH_HOOK)
    assert _parameters(oban_producer._get_jobs) == ["producer"]
    server = await start_oban({"contract_fetch": 1})
    producer = vars(server)["_producers"]["contract_fetch"]
    for field in ("_limit", "_running_jobs", "_queue", "_node", "_uuid", "_query"):
        assert field in vars(producer), f"patch fetch: Producer.{field} moved"
    assert callable(getattr(producer, "notify", None)), "patch fetch: Producer.notify"


def test_contract_run_job() -> None:
    # run_job: a producer runs a job with Executor(job=..., safe=True), awaits execute()
    # and acks executor.action through Query.ack_jobs.
    from oban import _executor as oban_executor

    executor = oban_executor.Executor
    assert _parameters(executor.__init__) == ["self", "job", "safe"], "patch run_job: Executor"
    assert inspect.iscoroutinefunction(executor.execute), "patch run_job: Executor.execute"
    assert "self.action" in inspect.getsource(executor.__init__), "patch run_job: action"
    produced = inspect.getsource(oban_producer.Producer._execute)
    assert "Executor(job=job, safe=True)" in produced, "patch run_job: how a producer runs"


def test_contract_instance_registry(pool: AsyncConnectionPool) -> None:
    # forget_instance: every Oban files itself under its name in oban.oban._instances.
    import oban.oban as oban_module

    name = unique("contract")
    oban = Oban(pool=pool, name=name)
    try:
        assert vars(oban_module)["_instances"][name] is oban, "patch forget_instance"
        assert vars(oban)["_name"] == name
    finally:
        forget_instance(oban)


def test_an_ack_names_the_fetched_attempt_in_naive_utc() -> None:
    from datetime import UTC, datetime, timedelta, timezone

    caracas = timezone(timedelta(hours=-4))
    attempted = datetime(2026, 3, 1, 8, 30, 0, 123456, tzinfo=caracas)
    assert _oban_compat._naive_utc(attempted) == datetime(2026, 3, 1, 12, 30, 0, 123456)
    assert _oban_compat._naive_utc(attempted.astimezone(UTC)) == datetime(
        2026, 3, 1, 12, 30, 0, 123456
    )
    naive = _oban_compat._naive_utc(attempted)
    assert naive is not None
    assert naive.tzinfo is None
    assert _oban_compat._naive_utc(None) is None
