"""Each oban internal that ``statifier_oban._oban_compat`` reaches, on the installed oban.

Run these first when oban is upgraded: each test pins one item of the module's docstring.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier_oban import _oban_compat, latency

from oban_support.common import forget_instance, unique

SOURCE = Path(_oban_compat.__file__).parent


def test_only_the_compat_module_imports_or_reads_oban_internals() -> None:
    offenders = []
    for path in sorted(SOURCE.glob("*.py")):
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
            if isinstance(node, ast.Attribute) and node.attr in {"_query", "_prefix", "_pool"}:
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
