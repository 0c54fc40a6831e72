"""The pytest plugin of ``statifier_oban.testing``: loaded by its entry point, ``durable_env``.

Each test runs pytest in-process on test files of its own (``pytester``), as a user's
project would: no conftest, ``$DATABASE_URL`` naming this run's server (the plugin
creates its template and a database per test there, as it would on a user's server).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

CARD = Path(__file__).resolve().parents[3] / "examples" / "card_authorization.scxml"


@pytest.fixture
def project(pytester: pytest.Pytester, pg_server: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A project whose tests use ``durable_env`` on this run's server."""
    monkeypatch.setenv("DATABASE_URL", pg_server.url)
    pytester.makeini(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
    )
    return pytester


def test_durable_env_runs_a_week_in_a_test_of_a_project(project: pytest.Pytester) -> None:
    project.makepyfile(
        f"""
        import statifier

        CARD = statifier.compile(open({str(CARD)!r}).read())

        async def test_the_hold_expires(durable_env):
            await durable_env.executions.create(CARD, execution_id="card")
            await durable_env.advance("7d")
            await durable_env.assert_done("card", "expired")

        async def test_each_test_has_a_database_of_its_own(durable_env):
            assert (await durable_env.executions.list()).executions == ()
        """
    )
    result = project.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_an_unexpected_chart_error_fails_the_test_at_teardown(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import statifier

        CHART = statifier.compile('''<scxml xmlns="http://www.w3.org/2005/07/scxml"
            version="1.0" datamodel="python" initial="s">
          <state id="s"><onentry><assign location="x" expr="1"/></onentry></state>
        </scxml>''')

        async def test_creates_without_checking(durable_env):
            await durable_env.executions.create(CHART, execution_id="x")

        async def test_expects_it(durable_env):
            with durable_env.expect_error("error.execution"):
                await durable_env.executions.create(CHART, execution_id="x")
        """
    )
    result = project.runpytest()
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_creates_without_checking*",
            "*UnexpectedChartError: the chart raised 1 unexpected error event during 'the test'*",
            "*[[]x[]] error.execution at line 3:*",
        ]
    )


def test_a_failed_test_shows_the_environment(project: pytest.Pytester) -> None:
    project.makepyfile(
        f"""
        import statifier

        CARD = statifier.compile(open({str(CARD)!r}).read())

        async def test_wrong(durable_env):
            await durable_env.executions.create(CARD, execution_id="card")
            await durable_env.advance("1d")
            assert False
        """
    )
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*- statifier durable env -*",
            "  at t=1d* (the clock moved 1d); jobs run: 0",
            "  last steps (oldest first):",
            "    t=*ms card: by the test -> active in authorized (effects: *SendDelayed*)",
        ]
    )


def test_the_plugin_can_be_turned_off(project: pytest.Pytester) -> None:
    project.makepyfile("async def test_it(durable_env):\n    pass\n")
    result = project.runpytest("-p", "no:statifier_oban")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'durable_env' not found*"])
