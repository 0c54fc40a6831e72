"""``examples/web_console.py``: the API and the console mounted in an app of one's own."""

from __future__ import annotations

import importlib

import pytest


def test_the_web_console_example_serves_the_api_under_its_mount(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    example = importlib.import_module("web_console")  # examples/ is on pytest's pythonpath
    assert example.main(["--database-url", database_url, "--check"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "card_b is active in ['authorized']",
        "its hold fires authorization.expired",
        "executions: 2",
    ]
