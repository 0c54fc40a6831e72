"""The pytest plugin of ``statifier.testing`` (entry point ``pytest11``: loaded by itself).

Fixtures:

``chart_run``
    A factory with ``statifier.testing.start``'s arguments: ``chart_run("chart.scxml",
    datamodel={...})`` returns a started ``ChartRun``.

When a test that made runs fails, its report gets one section per run (``statifier run
<session id>``) showing where the run stood, whatever the failing check was (a plain
``assert`` included). ``-p no:statifier`` turns the plugin off.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import pytest

from statifier.testing._run import ChartRun, start

_RUNS = pytest.StashKey[list[ChartRun]]()

StartChart = Callable[..., ChartRun]
"""The ``chart_run`` fixture: ``statifier.testing.start`` remembered for the report."""


@pytest.fixture
def chart_run(request: pytest.FixtureRequest) -> StartChart:
    """Start a chart under test (``statifier.testing.start``'s arguments)."""
    runs = request.node.stash.setdefault(_RUNS, [])

    def make(*args: Any, **kwargs: Any) -> ChartRun:
        run = start(*args, **kwargs)
        runs.append(run)
        return run

    return make


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Add each run's report to a failed test's report."""
    report = yield
    if report.when == "call" and report.failed:
        for run in item.stash.get(_RUNS, []):
            report.sections.append((f"statifier run {run.session_id}", run.report()))
    return report
