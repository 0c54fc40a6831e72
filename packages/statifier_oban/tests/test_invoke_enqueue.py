"""Enqueueing and cancelling invocation jobs (``statifier_oban.invocations._enqueue``).

Nothing runs the queues here (a client-mode Oban): the tests read the stored rows. Entering
an invoking state stores exactly one job with the documented layout; a replay conflicts, a
re-entry (a later macrostep) gets a new job; a cancel reaches every pending generation and
never an executing job; refusals store nothing; opaque fields go through the codec.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from statifier.core import effects as fx
from statifier.core.events import Event
from statifier_oban._config import DEFAULT_INVOKE_DELIVERY
from statifier_oban._errors import ConfigError, InvalidScope, OpaqueValueError
from statifier_oban._names import INVOKE_WORKER
from statifier_oban.invocations import _args, _enqueue
from statifier_oban.rows._opaque import encode_field
from statifier_oban.telemetry import INVOKE_ENQUEUE_REJECTED, INVOKE_ENQUEUED

import oban_support.invoke_handlers as handlers
from oban_support.common import (
    JobRow,
    Sessions,
    capture_telemetry,
    chart,
    database_fixture,
    execute,
    job_row,
    job_rows,
    sessions_fixture,
    unique,
    wait_for_configuration,
    wait_until,
)
from oban_support.invoke_codecs import xor
from oban_support.invoke_harness import (
    ARGS_KEYS,
    InvokeEnv,
    env_fixture,
    invoke_effect,
    invoke_rows,
)

CAPTURE_PATH = "oban_support.invoke_handlers:CaptureHandler"

RETRYING = chart(
    """
    <state id="idle"><transition event="capture.requested" target="capturing"/></state>
    <state id="capturing">
      <invoke id="capture" type="myapp:capture"><param name="amount" expr="125"/></invoke>
      <transition event="capture.retry" target="capturing"/>
      <transition event="capture.withdrawn" target="idle"/>
    </state>
    """,
    initial="idle",
)


database = database_fixture()
env = env_fixture()
sessions = sessions_fixture()


async def rows_of_invoke_id(env: InvokeEnv, invoke_id: str) -> list[JobRow]:
    """Every row whose ``args.invoke_id`` is ``invoke_id`` (whatever the scope)."""
    return await job_rows(env.pool, "args->>'invoke_id' = %s", [invoke_id])


# --- the stored job -------------------------------------------------------------------------


async def test_entering_the_invoking_state_stores_exactly_one_job_with_the_documented_layout(
    env: InvokeEnv, sessions: Sessions
) -> None:
    queue = unique("parked")
    env.config(queue=queue)
    scope = unique("sess")
    emitted: list[Any] = []
    session = await sessions.start(
        RETRYING,
        session_id=scope,
        invoke_handlers={"myapp:capture": handlers.CaptureHandler},
        subscribers=[lambda _sid, message: emitted.append(message)],
    )
    session.send_event(Event(name="capture.requested", caller_context={"request": "r-9"}))
    await wait_for_configuration(session, "capturing")
    (row,) = await wait_until(lambda: invoke_rows(env.pool, scope), what="the job row")
    (effect,) = [message for message in emitted if isinstance(message, fx.Invoke)]

    assert (row.worker, row.queue, row.state, row.attempt) == (INVOKE_WORKER, queue, "available", 0)
    assert row.max_attempts == 20  # CaptureHandler declares no cap
    # No timeout; the unresolved-handler policy is always written (a row without it cancels).
    assert row.meta == {"delivery": DEFAULT_INVOKE_DELIVERY, "unresolved_handler": "cancel"}
    assert set(row.args) == ARGS_KEYS
    assert {key: row.args[key] for key in ("scope", "invoke_id", "handler", "type", "src")} == {
        "scope": scope,
        "invoke_id": "capture",
        "handler": CAPTURE_PATH,
        "type": "myapp:capture",
        "src": None,
    }
    assert row.args["params"] == {"json": '{"amount":125}'}
    assert row.args["content"] is None
    assert row.args["caller_context"] == {"json": '{"request":"r-9"}'}
    assert row.args["autoforward"] is False
    for key in ("state_index", "invoke_index", "macrostep", "microstep", "round"):
        assert row.args[key] == getattr(effect, key)
    assert _args.decode(row.args).invoke == effect


async def test_meta_and_max_attempts_carry_the_options_fixed_at_enqueue(env: InvokeEnv) -> None:
    queue = unique("parked")
    scope = unique("scope")
    config = env.config(
        queue=queue,
        invoke_timeout=1500,
        unresolved_handler="cancel",
        invoke_delivery="oban_support.invoke_deliveries:RecordingInvokeDelivery",
    )
    capped, _ = await _enqueue.enqueue(
        config, handlers.ThriceHandler, scope, invoke_effect(invoke_id="thrice")
    )
    once, _ = await _enqueue.enqueue(
        config, handlers.OnceHandler, scope, invoke_effect(invoke_id="once")
    )
    uncapped, _ = await _enqueue.enqueue(
        config, handlers.CaptureHandler, scope, invoke_effect(invoke_id="uncapped")
    )

    row = await job_row(env.pool, capped)
    assert row.meta == {
        "delivery": "oban_support.invoke_deliveries:RecordingInvokeDelivery",
        "timeout": 1500,
        "unresolved_handler": "cancel",
    }
    assert row.args["handler"] == "oban_support.invoke_handlers:ThriceHandler"
    assert row.max_attempts == 3
    assert (await job_row(env.pool, once)).max_attempts == 1
    assert (await job_row(env.pool, uncapped)).max_attempts == 20


# --- dedup ----------------------------------------------------------------------------------


async def test_enqueueing_the_same_effect_twice_is_one_row_and_a_conflict(env: InvokeEnv) -> None:
    config = env.config(queue=unique("parked"))
    scope = unique("scope")
    effect = invoke_effect()

    first = await _enqueue.enqueue(config, handlers.CaptureHandler, scope, effect)
    replay = await _enqueue.enqueue(config, handlers.CaptureHandler, scope, effect)

    assert first[1] is False
    assert replay == (first[0], True)
    assert [row.id for row in await invoke_rows(env.pool, scope)] == [first[0]]


async def test_the_dedup_guard_holds_in_every_state_of_the_row(env: InvokeEnv) -> None:
    config = env.config(queue=unique("parked"))
    scope = unique("scope")
    effect = invoke_effect()
    job_id, _ = await _enqueue.enqueue(config, handlers.CaptureHandler, scope, effect)
    for state in ("completed", "cancelled", "discarded"):
        await execute(env.pool, "UPDATE oban_jobs SET state = %s WHERE id = %s", [state, job_id])
        assert await _enqueue.enqueue(config, handlers.CaptureHandler, scope, effect) == (
            job_id,
            True,
        )
    assert len(await invoke_rows(env.pool, scope)) == 1


async def test_a_later_macrostep_gets_a_new_job_and_other_scopes_are_separate(
    env: InvokeEnv,
) -> None:
    config = env.config(queue=unique("parked"))
    scope = unique("scope")
    first, _ = await _enqueue.enqueue(
        config, handlers.CaptureHandler, scope, invoke_effect(macrostep=1)
    )
    reentry = await _enqueue.enqueue(
        config, handlers.CaptureHandler, scope, invoke_effect(macrostep=4)
    )
    elsewhere = await _enqueue.enqueue(
        config, handlers.CaptureHandler, unique("other"), invoke_effect(macrostep=1)
    )

    assert reentry[1] is False
    assert reentry[0] != first
    assert elsewhere[1] is False
    assert elsewhere[0] not in (first, reentry[0])
    assert len(await invoke_rows(env.pool, scope)) == 2


async def test_re_entering_the_invoking_state_stores_a_new_generation(
    env: InvokeEnv, sessions: Sessions
) -> None:
    env.config(queue=unique("parked"))
    scope = unique("sess")
    session = await sessions.start(
        RETRYING, session_id=scope, invoke_handlers={"myapp:capture": handlers.CaptureHandler}
    )
    session.send_event(Event(name="capture.requested"))
    await wait_until(lambda: invoke_rows(env.pool, scope), what="the first job")
    session.send_event(Event(name="capture.retry"))  # exits and re-enters "capturing"

    async def two_rows() -> Any:
        rows = await invoke_rows(env.pool, scope)
        return rows if len(rows) == 2 else None

    first, second = await wait_until(two_rows, what="the second generation")
    assert first.args["macrostep"] < second.args["macrostep"]
    assert (first.state, second.state) == ("cancelled", "available")  # the exit cancelled it
    assert first.args["invoke_id"] == second.args["invoke_id"] == "capture"


# --- cancel ---------------------------------------------------------------------------------


async def test_cancel_reaches_every_pending_generation_but_never_an_executing_or_finished_job(
    env: InvokeEnv,
) -> None:
    config = env.config(queue=unique("parked"))
    scope = unique("scope")
    states = ["available", "scheduled", "retryable", "executing", "completed"]
    ids = {}
    for macrostep, state in enumerate(states, start=1):
        ids[state], _ = await _enqueue.enqueue(
            config, handlers.CaptureHandler, scope, invoke_effect(macrostep=macrostep)
        )
        await execute(
            env.pool, "UPDATE oban_jobs SET state = %s WHERE id = %s", [state, ids[state]]
        )
    other_id, _ = await _enqueue.enqueue(
        config, handlers.CaptureHandler, scope, invoke_effect(invoke_id="authorize")
    )
    other_scope, _ = await _enqueue.enqueue(
        config, handlers.CaptureHandler, unique("other"), invoke_effect()
    )

    assert await _enqueue.cancel(config, scope, "capture") == 3

    after = {state: (await job_row(env.pool, job_id)).state for state, job_id in ids.items()}
    assert after == {
        "available": "cancelled",
        "scheduled": "cancelled",
        "retryable": "cancelled",
        "executing": "executing",
        "completed": "completed",
    }
    assert (await job_row(env.pool, other_id)).state == "available"
    assert (await job_row(env.pool, other_scope)).state == "available"
    assert await _enqueue.cancel(config, scope, "capture") == 0  # nothing pending is left


async def test_cancelling_an_unknown_invocation_is_a_no_op(env: InvokeEnv) -> None:
    config = env.config(queue=unique("parked"))
    scope = unique("scope")
    job_id, _ = await _enqueue.enqueue(config, handlers.CaptureHandler, scope, invoke_effect())

    assert await _enqueue.cancel(config, scope, "never_started") == 0
    assert await _enqueue.cancel(config, unique("nobody"), "capture") == 0
    assert (await job_row(env.pool, job_id)).state == "available"


async def test_cancelling_under_an_invalid_scope_is_refused(env: InvokeEnv) -> None:
    config = env.config(queue=unique("parked"))
    with capture_telemetry() as seen:
        for scope in ("", None):
            with pytest.raises(InvalidScope):
                await _enqueue.cancel(config, scope, "capture")  # type: ignore[arg-type]
    assert seen.events == []


# --- refusals -------------------------------------------------------------------------------


async def test_a_config_without_an_invoke_queue_refuses_and_stores_nothing(env: InvokeEnv) -> None:
    config = env.config(queue=None)
    scope = unique("scope")
    invoke_id = unique("inv")

    with pytest.raises(ConfigError) as raised:
        await _enqueue.enqueue(
            config, handlers.CaptureHandler, scope, invoke_effect(invoke_id=invoke_id)
        )

    assert raised.value.option == "invoke_queue"
    assert await rows_of_invoke_id(env, invoke_id) == []


@pytest.mark.parametrize("scope", ["", None, 42], ids=repr)
async def test_an_invalid_scope_refuses_stores_nothing_and_leaks_no_scope(
    env: InvokeEnv, scope: Any
) -> None:
    config = env.config(queue=unique("parked"))
    invoke_id = unique("inv")
    with capture_telemetry() as seen, pytest.raises(InvalidScope):
        await _enqueue.enqueue(
            config, handlers.CaptureHandler, scope, invoke_effect(invoke_id=invoke_id)
        )

    assert await rows_of_invoke_id(env, invoke_id) == []
    (event,) = seen.named(INVOKE_ENQUEUE_REJECTED, invoke_id=invoke_id)
    assert event["scope"] is None
    assert event["reason"] == "invalid_scope"
    assert seen.named(INVOKE_ENQUEUED, invoke_id=invoke_id) == []


# --- opaque fields and the codec ------------------------------------------------------------


def decoded_text(stored: dict[str, str]) -> str:
    """The plain JSON text behind an ``XorCodec`` payload."""
    return xor(base64.b64decode(stored["b64"])).decode("utf-8")


async def test_params_content_and_caller_context_go_through_the_codec(env: InvokeEnv) -> None:
    codec = "oban_support.invoke_codecs:XorCodec"
    config = env.config(queue=unique("parked"), opaque_codec=codec)
    scope = unique("scope")
    effect = invoke_effect(
        params={"amount": 125, "card": "tok_visa"},
        content={"lines": [1, 2.5, None], "note": "héllo"},
        caller_context={"request": "r-1"},
    )
    job_id, _ = await _enqueue.enqueue(config, handlers.CaptureHandler, scope, effect)
    row = await job_row(env.pool, job_id)

    for field, value in [
        ("params", effect.params),
        ("content", effect.content),
        ("caller_context", effect.caller_context),
    ]:
        stored = row.args[field]
        assert set(stored) == {"codec", "b64"}
        assert stored["codec"] == codec
        assert "tok_visa" not in stored["b64"]
        assert json.loads(decoded_text(stored)) == value
    assert row.args["scope"] == scope
    assert row.args["invoke_id"] == "capture"
    assert _args.decode(row.args).invoke == effect


async def test_a_nondeterministic_codec_still_dedups_and_its_jobs_are_cancellable(
    env: InvokeEnv,
) -> None:
    codec = "oban_support.invoke_codecs:NondeterministicXorCodec"
    config = env.config(queue=unique("parked"), opaque_codec=codec)
    scope = unique("scope")
    effect = invoke_effect(params={"amount": 125, "memo": "x" * 40})
    encodings = {encode_field("params", effect.params, codec)["b64"] for _ in range(4)}  # type: ignore[index]
    assert len(encodings) > 1  # the codec really is nondeterministic

    first = await _enqueue.enqueue(config, handlers.CaptureHandler, scope, effect)
    replay = await _enqueue.enqueue(config, handlers.CaptureHandler, scope, effect)

    assert replay == (first[0], True)
    assert len(await invoke_rows(env.pool, scope)) == 1
    assert await _enqueue.cancel(config, scope, "capture") == 1
    assert (await job_row(env.pool, first[0])).state == "cancelled"


async def test_a_codec_failing_at_encode_stores_nothing(env: InvokeEnv) -> None:
    config = env.config(queue=unique("parked"), opaque_codec="oban_support.invoke_codecs:BoomCodec")
    scope = unique("scope")
    with capture_telemetry() as seen, pytest.raises(OpaqueValueError, match="boom"):
        await _enqueue.enqueue(config, handlers.CaptureHandler, scope, invoke_effect())

    assert await invoke_rows(env.pool, scope) == []
    (event,) = seen.named(INVOKE_ENQUEUE_REJECTED, scope)
    assert event["reason"] == "codec_failed"
    assert seen.named(INVOKE_ENQUEUED, scope) == []
