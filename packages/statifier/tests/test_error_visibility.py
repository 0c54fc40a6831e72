"""``error.*`` events a chart raises are visible: printed by the CLI, logged by a live
session at WARNING, kept by the virtual driver."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
import statifier
from statifier.cli import main
from statifier.core import effects as fx
from statifier.runtime.session import Session
from statifier.virtual import VirtualDriver

TYPO = """<scxml xmlns="http://www.w3.org/2005/07/scxml" initial="capturing" name="card">
  <datamodel><data id="captures" expr="0"/></datamodel>
  <state id="capturing">
    <onentry><assign location="captures" expr="captures + 1"/></onentry>
    <transition event="capture.failed" cond="capturez &lt; 3" target="capturing"/>
    <transition event="capture.failed" target="expired"/>
  </state>
  <final id="expired"/>
</scxml>
"""
MESSAGE = "condition 'capturez < 3': name 'capturez' is not defined"


def test_cli_prints_each_error_with_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chart = tmp_path / "typo.scxml"
    chart.write_text(TYPO)
    assert main(["run", str(chart), "-e", "capture.failed"]) == 0
    out = capsys.readouterr().out
    assert f"   error.execution at {chart}:5: {MESSAGE}\n" in out


def test_virtual_driver_keeps_errors() -> None:
    driver = VirtualDriver(statifier.compile(TYPO))
    driver.start()
    driver.send("capture.failed")
    driver.run_until_idle()
    ((session, error),) = driver.errors
    assert session == driver.top
    assert (error.name, error.line, error.message) == ("error.execution", 5, MESSAGE)
    assert error in driver.effects
    assert any(isinstance(e, fx.ErrorRaised) for e in driver.effects)


async def test_live_session_logs_each_error_at_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="statifier.runtime.session")
    session = await Session.start(statifier.compile(TYPO), session_id="sess_typo")
    session.send_event("capture.failed")
    await asyncio.wait_for(session.wait_halted(), 5)
    await session.stop()
    (record,) = [r for r in caplog.records if "error.execution" in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert (
        record.getMessage() == f"session sess_typo: error.execution in chart card line 5: {MESSAGE}"
    )
