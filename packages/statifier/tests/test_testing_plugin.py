"""The pytest plugin of ``statifier.testing``: loaded by its entry point, fixtures and reports.

Each test runs pytest in-process on test files of its own (``pytester``), as a user's
project would, with no conftest: whatever the inner run finds comes from the plugin.
"""

from __future__ import annotations

from pathlib import Path

import pytest

CARD = Path(__file__).resolve().parents[3] / "examples" / "card_authorization.scxml"


@pytest.fixture(autouse=True)
def quiet_asyncio(pytester: pytest.Pytester) -> None:
    """The inner runs load pytest-asyncio too: give it the loop scope it asks for."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def test_the_plugin_is_loaded_by_its_entry_point(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        f"""
        def test_the_hold_expires(chart_run):
            run = chart_run({str(CARD)!r})
            run.advance("7d")
            run.assert_done("expired")
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_the_plugin_can_be_turned_off(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_uses_the_fixture(chart_run):
            pass
        """
    )
    result = pytester.runpytest("-p", "no:statifier")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'chart_run' not found*"])


def test_a_failed_test_reports_where_each_run_stood(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        f"""
        def test_a_plain_assert_fails(chart_run):
            run = chart_run({str(CARD)!r}, session_id="card_1")
            run.send("capture.requested", {{"amount": 5}})
            assert run.active == ("settled",)
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*- statifier run card_1 -*",
            "  chart card_authorization, session card_1, at t=0ms",
            "  status: running; active: capturing",
            "  datamodel: {'captures': 1}",
            "  last events (oldest first):",
            "    t=0ms 'capture.requested' data={'amount': 5}",
            "  pending timers: none",
        ]
    )


def test_a_passing_test_adds_no_report(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        f"""
        def test_fine(chart_run):
            chart_run({str(CARD)!r}).assert_active("authorized")
        """
    )
    result = pytester.runpytest("-rA")
    result.assert_outcomes(passed=1)
    assert "statifier run" not in result.stdout.str()


def test_an_unexpected_chart_error_fails_the_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        CHART = '''<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0"
            datamodel="python" initial="idle">
          <datamodel><data id="total" expr="0"/></datamodel>
          <state id="idle">
            <transition event="add">
              <assign location="total" expr="total + _event.data"/>
            </transition>
          </state>
        </scxml>'''

        def test_without_data(chart_run):
            chart_run(CHART).send("add")

        def test_expecting_it(chart_run):
            run = chart_run(CHART)
            with run.expect_error("error.execution"):
                run.send("add")
            run.send("add", 2)
            run.assert_datamodel(total=2)
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*UnexpectedChartError: the chart raised 1 unexpected error event during 'send add'*",
            "*error.execution at line 6:*",
        ]
    )
