"""Smoke."""
from __future__ import annotations
import time
from pathlib import Path
import statifier
from statifier_oban.testing import DurableEnv

CARD = statifier.compile((Path(__file__).resolve().parents[3] / "examples" / "card_authorization.scxml").read_text())


async def test_smoke(durable_env: DurableEnv) -> None:
    env = durable_env
    t0 = time.monotonic()
    await env.executions.create(CARD, execution_id="card_a")
    await env.assert_timer("card_a", "hold", due="7d")
    ran = await env.advance("6d")
    assert ran == []
    await env.assert_active("card_a", "authorized")
    ran = await env.advance("1d")
    print(ran, time.monotonic() - t0)
    await env.assert_done("card_a", "expired")
    print(await env.describe("card_a"))
