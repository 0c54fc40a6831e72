"""``statifier-oban worker --loop``: which event loop each choice runs on (ADR 36)."""

from __future__ import annotations

import asyncio
import gc
import sys
import warnings

import pytest
import uvloop
from statifier.cli import kit
from statifier_oban import cli
from statifier_oban.cli._loop import LOOPS, LoopFactory, loop_factory, loop_name


def test_auto_and_uvloop_run_on_uvloop_and_asyncio_on_its_own_loop() -> None:
    assert loop_factory("auto") is uvloop.new_event_loop
    assert loop_factory("uvloop") is uvloop.new_event_loop
    assert loop_factory("asyncio") is None
    assert LOOPS[0] == "auto"


def test_without_uvloop_auto_falls_back_and_uvloop_refuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # ``import uvloop`` raises ImportError

    assert loop_factory("auto") is None
    with pytest.raises(kit.CommandError, match=r"^--loop uvloop: uvloop does not import here"):
        loop_factory("uvloop")


def test_an_unknown_loop_is_refused() -> None:
    with pytest.raises(kit.CommandError, match=r"--loop is one of auto, uvloop, asyncio, not 'x'"):
        loop_factory("x")


WORKER = ["worker", "--database-url", "postgresql://nowhere", "--queue", "timers=1"]


def test_the_command_line_refuses_an_unknown_loop(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([*WORKER, "--loop", "trio"]) == 2
    assert "'trio' is not one of 'auto', 'uvloop', 'asyncio'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("factory", "name"), [(uvloop.new_event_loop, "uvloop"), (None, "asyncio")]
)
def test_a_loop_is_named_by_its_package(factory: LoopFactory | None, name: str) -> None:
    async def running() -> str:
        return loop_name(asyncio.get_running_loop())

    assert asyncio.run(running(), loop_factory=factory) == name


def test_a_worker_without_uvloop_that_asks_for_it_stops_before_anything_is_made(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cli.main([*WORKER, "--loop", "uvloop"]) == 1
        gc.collect()

    assert [str(warning.message) for warning in caught] == []  # no worker coroutine left
    err = capsys.readouterr().err
    assert err.startswith("statifier-oban worker: error: --loop uvloop: uvloop does not import")
    assert err.count("\n") == 1
