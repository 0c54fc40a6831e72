"""``statifier.testing``: a chart under test in virtual time, and checks that explain."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
import statifier
from statifier import effects
from statifier.chart.durations import InvalidDuration
from statifier.testing import ChartAssertionError, ChartRun, UnexpectedChartError, start

from engine_support.charts import CAPTURE

ROOT = Path(__file__).resolve().parents[3]
CARD = ROOT / "examples" / "card_authorization.scxml"

BROKEN = """<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python"
        name="broken" initial="idle">
  <datamodel><data id="total" expr="0"/></datamodel>
  <state id="idle">
    <transition event="add" target="idle">
      <assign location="total" expr="total + _event.data['amount']"/>
    </transition>
  </state>
</scxml>"""


def card() -> ChartRun:
    return start(CARD)


# -- time ------------------------------------------------------------------------------------


def test_the_seven_day_hold_fires_at_seven_days_and_not_a_millisecond_before() -> None:
    run = card()
    run.advance("6d23h59m59.999s")
    run.assert_active("authorized")
    assert run.now_ms == 7 * 86_400_000 - 1
    run.advance(1)
    run.assert_done("expired")
    assert run.now_ms == 7 * 86_400_000


def test_spans_are_durations_milliseconds_or_timedeltas() -> None:
    run = card()
    run.advance(timedelta(days=2))
    run.advance("2d")
    run.advance(2 * 86_400_000)
    assert run.now_ms == 6 * 86_400_000
    with pytest.raises(InvalidDuration, match="negative"):
        run.advance(-1)
    with pytest.raises(InvalidDuration, match="expected a number and a unit"):
        run.advance("a week")


def test_timers_due_on_the_way_fire_in_due_order() -> None:
    chart = """<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python"
            initial="s">
      <datamodel><data id="seen" expr="[]"/></datamodel>
      <state id="s">
        <onentry>
          <send event="c" delay="3h"/><send event="a" delay="1h"/><send event="b" delay="2h"/>
        </onentry>
        <transition event="a b c">
          <assign location="seen" expr="seen + [_event.name]"/>
        </transition>
      </state>
    </scxml>"""
    run = start(chart)
    run.advance("2h")
    run.assert_datamodel(seen=["a", "b"])
    run.assert_timer(event="c", due="1h")
    run.advance("1h")
    run.assert_datamodel(seen=["a", "b", "c"])
    run.assert_no_timer()
    assert [(e.t_ms, e.event.name) for e in run.events] == [
        (3_600_000, "a"),
        (7_200_000, "b"),
        (10_800_000, "c"),
    ]


# -- events, effects, the datamodel ----------------------------------------------------------


def test_a_capture_takes_the_hold_down() -> None:
    run = card()
    run.assert_timer("hold", event="authorization.expired", due="7d")
    run.send("capture.requested")
    cancel = run.assert_raised(effects.Cancel, send_id="hold")
    assert isinstance(cancel, effects.Cancel)
    run.assert_not_raised(effects.SendDelayed)
    run.assert_no_timer("hold")
    run.assert_configuration("capturing")
    run.assert_datamodel(captures=1)
    run.send("capture.failed").send("capture.succeeded")
    run.assert_done("settled", captures=2)
    assert run.final_configuration == ("settled",)
    assert run.active == ()
    assert run.donedata == {"captures": 2}


def test_events_carry_data() -> None:
    run = start(BROKEN)
    run.send("add", {"amount": 5})
    run.send(statifier.Event(name="add", data={"amount": 7}))
    run.assert_datamodel({"total": 12})
    assert [heard.event.data for heard in run.events] == [{"amount": 5}, {"amount": 7}]


def test_the_datamodel_leaves_system_variables_out() -> None:
    assert card().datamodel == {"captures": 0}


def test_a_run_starts_with_seeded_variables() -> None:
    run = start(CAPTURE, datamodel={"amount": 250}, invoke_types=["payments:capture"])
    (invocation,) = run.open_invocations
    assert invocation.effect.params == {"amount": 250}


def test_a_run_records_its_steps_and_effects() -> None:
    run = card()
    run.send("capture.requested")
    assert [(step.t_ms, step.action) for step in run.steps] == [
        (0, "start"),
        (0, "send capture.requested"),
    ]
    assert [type(e).__name__ for e in run.last_effects] == ["Cancel", "DatamodelChange"]
    # A run is traced: DatamodelChange effects carry their values.
    assert [type(e).__name__ for e in run.effects][:4] == [
        "DatamodelInit",
        "DatamodelChange",
        "SendDelayed",
        "Log",
    ]
    assert run.log == [("authorized", "hold armed for 7 days")]


# -- invocations ------------------------------------------------------------------------------


def test_an_invocation_is_answered_by_the_test() -> None:
    run = start(CAPTURE, invoke_types=["payments:capture"])
    run.answer("cap", {"capture_id": "c1"})
    run.assert_done("settled", result={"capture_id": "c1"})


def test_an_invocation_that_never_answers_times_out() -> None:
    run = start(CAPTURE, invoke_types=["payments:capture"])
    run.advance("30s")
    run.assert_done("failed")
    assert run.open_invocations == []


def test_a_failed_invocation() -> None:
    run = start(CAPTURE, invoke_types=["payments:capture"])
    run.fail("cap", "declined")
    run.assert_done("failed")


def test_answering_what_is_not_open_fails_the_check() -> None:
    run = start(CAPTURE, invoke_types=["payments:capture"])
    with pytest.raises(ChartAssertionError, match="no open invocation 'nope'"):
        run.answer("nope")


# -- errors -----------------------------------------------------------------------------------


def test_an_unexpected_error_fails_the_action_that_raised_it() -> None:
    run = start(BROKEN)
    with pytest.raises(UnexpectedChartError) as caught:
        run.send("add")  # no data: _event.data['amount'] fails
    message = str(caught.value)
    assert message.startswith(
        "the chart raised 1 unexpected error event during 'send add' (allow them with "
        "allow_errors(...) or expect them with expect_error(...)):\n  error.execution at line 6:"
    )
    assert [error.name for _, error in caught.value.errors] == ["error.execution"]
    # Reported once: the next action does not raise it again.
    run.send("add", {"amount": 1})
    run.assert_datamodel(total=1)


def test_an_error_the_chart_was_started_with_fails_start() -> None:
    with pytest.raises(UnexpectedChartError, match="during 'start'"):
        start(CAPTURE)  # payments:capture is no invoke type of this run


def test_an_expected_error_passes_and_an_absent_one_fails() -> None:
    run = start(BROKEN)
    with run.expect_error("error.execution") as errors:
        run.send("add")
    assert [error.name for error in errors] == ["error.execution"]
    absent = re.escape("expected an error matching 'error.execution'")
    with pytest.raises(ChartAssertionError, match=absent), run.expect_error("error.execution"):
        run.send("add", {"amount": 1})


def test_an_expected_error_of_another_kind_is_still_unexpected() -> None:
    run = start(BROKEN)
    with pytest.raises(UnexpectedChartError), run.expect_error("error.communication"):
        run.send("add")


def test_allowed_errors_pass() -> None:
    run = start(BROKEN, allow_errors=["error.execution"])
    run.send("add")
    assert len(run.errors) == 1
    later = start(BROKEN)
    later.allow_errors("error")  # a descriptor: every error.*
    later.send("add")


# -- failures explain --------------------------------------------------------------------------


def test_a_failed_check_shows_where_the_run_stood() -> None:
    run = card()
    run.advance("1d")
    run.send("capture.requested", {"amount": 5})
    with pytest.raises(ChartAssertionError) as caught:
        run.assert_active("settled")
    assert str(caught.value).splitlines() == [
        "expected 'settled' to be active",
        "  chart card_authorization, session sess_test, at t=1d",
        "  status: running; active: capturing",
        "  datamodel: {'captures': 1}",
        "  last events (oldest first):",
        "    t=1d 'capture.requested' data={'amount': 5}",
        "  pending timers: none",
        "  last action: send capture.requested at t=1d; effects: Cancel, DatamodelChange",
    ]


def test_the_report_lists_pending_timers_invocations_and_errors() -> None:
    run = start(CAPTURE, invoke_types=["payments:capture"], allow_errors=["error"])
    run.advance("10s")
    report = run.report().splitlines()
    assert "    'timeout' (send_id give_up) due at t=30s (in 20s)" in report
    assert "  open invocations: cap (payments:capture)" in report
    broken = start(BROKEN, allow_errors=["error"])
    broken.send("add")
    assert any(
        line.startswith("    error.execution at line 6: ") for line in broken.report().splitlines()
    )


def test_a_finished_run_reports_its_final_state() -> None:
    run = card()
    run.advance("7d")
    assert "  status: done; final state: expired" in run.report().splitlines()


def test_a_misspelled_state_is_named() -> None:
    with pytest.raises(
        ChartAssertionError, match="the chart has no state 'setled'; did you mean 'settled'"
    ):
        card().assert_done("setled")


@pytest.mark.parametrize(
    ("check", "message"),
    [
        (lambda run: run.assert_not_active("authorized"), "expected 'authorized' not to be active"),
        (
            lambda run: run.assert_configuration("capturing"),
            "expected the active states to be 'capturing', not 'authorized'",
        ),
        (lambda run: run.assert_done(), "expected the chart to be done"),
        (
            lambda run: run.assert_datamodel(captures=2, capture=1),
            "the datamodel differs:\n  captures: expected 2, found 0\n"
            "  capture: missing (expected 1); did you mean 'captures'?",
        ),
        (
            lambda run: run.assert_raised(effects.Cancel),
            "expected the last action to raise Cancel(); "
            "it raised DatamodelInit, DatamodelChange, SendDelayed, Log",
        ),
        (
            lambda run: run.assert_raised(effects.SendDelayed, send_id="other"),
            "expected the last action to raise SendDelayed(send_id='other'); "
            "it raised DatamodelInit, DatamodelChange, SendDelayed, Log",
        ),
        (
            lambda run: run.assert_not_raised(effects.SendDelayed, send_id="hold"),
            "expected the last action not to raise SendDelayed(send_id='hold'); it raised "
            "SendDelayed(event='authorization.expired', target=None, type=None, data=None, "
            "send_id='hold', delay_ms=604800000, c_index=0, owner=['onentry', 1, 0], "
            "ordinal=1, id_from_author=True, caller_context=None)",
        ),
        (
            lambda run: run.assert_timer("hold", due="6d"),
            "expected a pending timer (send_id 'hold') due in 6d",
        ),
        (
            lambda run: run.assert_no_timer(event="authorization.expired"),
            "expected no pending timer with event 'authorization.expired'; "
            "'authorization.expired' (send_id hold) is",
        ),
    ],
)
def test_each_check_says_what_failed(check: object, message: str) -> None:
    run = card()
    with pytest.raises(ChartAssertionError) as caught:
        check(run)  # type: ignore[operator]
    assert str(caught.value).startswith(message + "\n  chart card_authorization")


def test_a_finished_chart_in_another_final_state() -> None:
    run = card()
    run.advance("7d")
    with pytest.raises(
        ChartAssertionError,
        match="expected the chart to end in 'settled'; the final state reached: 'expired'",
    ):
        run.assert_done("settled")
    run.assert_done("expired")
    with pytest.raises(
        ChartAssertionError, match=re.escape("cannot send 'capture.requested': the chart is done")
    ):
        run.send("capture.requested")


def test_an_effect_check_refuses_a_field_the_effect_lacks() -> None:
    with pytest.raises(TypeError, match="Cancel has no field 'sendid'; did you mean 'send_id'"):
        card().assert_raised(effects.Cancel, sendid="hold")


def test_a_chart_is_a_machine_a_path_or_text() -> None:
    machine = statifier.compile(CARD.read_text())
    assert start(machine).active == start(CARD).active == start(str(CARD)).active == ("authorized",)
    assert start(CARD.read_text(), session_id="sess_x").state.datamodel["_sessionid"] == "sess_x"
