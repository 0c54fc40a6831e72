"""The timer job's args: ``_args.encode`` / ``decode`` round trip, exactly.

Spec 3.1 and acceptance 6: every schedulable effect survives JSON (and PostgreSQL's
jsonb) unchanged, every owner shape included; corrupt args raise ``UndecodableRow``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pickle
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier.core.effects import SendDelayed
from statifier.values import read_json
from statifier_oban._errors import UndecodableRow
from statifier_oban.store import _fetch, _oban_compat
from statifier_oban.timers import _args, _schedule
from statifier_oban.timers._schedule import schedule, schedule_many

from oban_support.effects_factory import ARGS_KEYS, make_config, raw_args, send_delayed

SCOPE = "session-1"


def same(left: Any, right: Any) -> bool:
    """Equal and of the same types all the way down: dict key order, -0.0 vs 0.0, bool
    vs int and float vs int all count."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return list(left) == list(right) and all(same(left[k], right[k]) for k in left)
    if isinstance(left, list | tuple):
        return len(left) == len(right) and all(map(same, left, right))
    if isinstance(left, float):
        return left == right and math.copysign(1.0, left) == math.copysign(1.0, right)
    if dataclasses.is_dataclass(left):
        return all(
            same(getattr(left, f.name), getattr(right, f.name)) for f in dataclasses.fields(left)
        )
    return bool(left == right)


def through_json(value: Any) -> Any:
    """``value`` after a JSON text round trip (what any JSON store at least does)."""
    return json.loads(json.dumps(value))


def round_trip(effect: SendDelayed, scope: str = SCOPE) -> tuple[str, SendDelayed]:
    return _args.decode(through_json(_args.encode(scope, effect, None)))


def test_same_sees_what_equality_hides() -> None:
    assert same({"a": 1, "b": 2}, {"a": 1, "b": 2})
    assert not same({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert not same(-0.0, 0.0)
    assert not same(1, True)
    assert not same(1, 1.0)
    assert not same(send_delayed(data=[0.0]), send_delayed(data=[-0.0]))


# --- strategies ---------------------------------------------------------------------------

naturals = st.integers(min_value=0, max_value=2**31)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**200), max_value=2**200)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0.1, -0.0, 0.0, 1e300, -1e-300, 5e-324, 2.0**53 + 1, 1 / 3])
    | st.text()
)
json_like = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children),
    max_leaves=12,
)
owners = st.one_of(
    st.tuples(st.sampled_from(["onentry", "onexit", "finalize"]), naturals, naturals),
    st.tuples(st.just("transition"), naturals),
)
effects = st.builds(
    SendDelayed,
    event=st.text(min_size=1),
    target=st.none(),
    type=st.none() | st.text(),
    data=json_like,
    send_id=st.text(min_size=1),
    delay_ms=st.integers(min_value=0, max_value=2**45),
    c_index=naturals,
    owner=owners,
    ordinal=st.integers(min_value=1, max_value=2**62),
    id_from_author=st.booleans(),
    caller_context=json_like,
    macrostep=naturals,
    microstep=naturals,
    round=naturals,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scope=st.text(min_size=1), effect=effects)
def test_any_schedulable_effect_round_trips_through_json(scope: str, effect: SendDelayed) -> None:
    args = _args.encode(scope, effect, None)

    assert set(args) == ARGS_KEYS
    decoded_scope, decoded = _args.decode(through_json(args))

    assert decoded_scope == scope
    assert decoded == effect
    assert same(decoded, effect)


@pytest.mark.parametrize(
    "owner",
    [("onentry", 0, 0), ("onexit", 3, 7), ("transition", 12), ("finalize", 2, 1)],
)
def test_every_owner_shape_round_trips(owner: tuple[Any, ...]) -> None:
    args = through_json(_args.encode(SCOPE, send_delayed(owner=owner), None))

    assert args["owner"] == list(owner)
    _, decoded = _args.decode(args)
    assert decoded.owner == owner
    assert type(decoded.owner) is tuple


@pytest.mark.parametrize("target", ["#_internal", "#_parent", "#_scxml_other", "#_inv_1"])
def test_a_targeted_timer_of_a_durable_execution_round_trips(target: str) -> None:
    """Executions schedule every target (routed when the timer fires), so rows carry it."""
    args = through_json(_args.encode(SCOPE, send_delayed(target=target), None))
    assert args["target"] == target
    _, decoded = _args.decode(args)
    assert decoded.target == target


def test_a_corrupt_row_is_quoted_briefly() -> None:
    args = good_args()
    args["event"] = ["x" * 100_000]
    with pytest.raises(UndecodableRow) as caught:
        _args.decode(args)
    assert len(str(caught.value)) < 1_000


def test_a_null_owner_round_trips() -> None:
    """Spec 3.1: owner on the wire is one of the four shapes *or null*; encode writes null
    for an effect without an owner, so decode must read it back as None."""
    args = through_json(_args.encode(SCOPE, send_delayed(owner=None), None))

    assert args["owner"] is None
    _, decoded = _args.decode(args)
    assert decoded.owner is None


TRICKY_VALUES: list[Any] = [
    0.1,
    -0.0,
    1e300,
    5e-324,
    2**64 + 1,
    -(2**100),
    'unicode: é ü 中文 🎉 \u2028 \x00 \\ "',
    {"z": 1, "a": 2, "m": [3, {"y": None, "b": True}]},
    [[], {}, "", 0, 0.0, False, None],
    {"": {"": [1.5, -1.5, 1e-7]}},
    True,
    "",
    0,
]


@pytest.mark.parametrize("value", TRICKY_VALUES, ids=repr)
def test_tricky_data_and_caller_context_round_trip_exactly(value: Any) -> None:
    effect = send_delayed(data=value, caller_context=value)

    _, decoded = round_trip(effect)

    assert same(decoded.data, value)
    assert same(decoded.caller_context, value)


def test_none_data_and_caller_context_are_stored_as_null() -> None:
    args = _args.encode(SCOPE, send_delayed(data=None, caller_context=None), None)

    assert args["data"] is None
    assert args["caller_context"] is None
    _, decoded = _args.decode(through_json(args))
    assert decoded.data is None
    assert decoded.caller_context is None


# --- through the real database ------------------------------------------------------------

DB_EFFECTS = [
    send_delayed(ordinal=1, owner=("onentry", 0, 0), data=None, caller_context=None),
    send_delayed(
        ordinal=2,
        owner=("onexit", 4, 2),
        data={"z": 0.1, "a": -0.0, "big": 2**70, "tiny": 5e-324, "huge": 1e300},
        caller_context={"trace": "é🎉", "ids": [3, 2, 1]},
        type="http://www.w3.org/TR/scxml/#SCXMLEventProcessor",
        id_from_author=False,
    ),
    send_delayed(
        ordinal=3,
        owner=("transition", 17),
        data=[{"b": 1, "a": 2}, [1.0, 1, True], "", {}],
        caller_context=0.30000000000000004,
        delay_ms=1,
        macrostep=2**31,
        microstep=7,
        round=3,
        c_index=0,
    ),
    send_delayed(
        ordinal=4,
        owner=("finalize", 1, 0),
        data='plain string \\ with "quotes" and \u2028',
        caller_context=-(2**80),
        send_id="send_12",
    ),
]


async def test_effects_round_trip_exactly_through_the_job_row(
    oban_client: Oban, pool: AsyncConnectionPool
) -> None:
    config = make_config(oban_client)
    jobs = [await schedule(config, SCOPE, effect) for effect in DB_EFFECTS[:2]]
    jobs += await schedule_many(config, SCOPE, DB_EFFECTS[2:])

    for timer, effect in zip(jobs, DB_EFFECTS, strict=True):
        stored = await raw_args(pool, timer.job_id)
        assert set(stored) == ARGS_KEYS
        scope, decoded = _args.decode(stored)
        assert scope == SCOPE
        assert decoded == effect
        assert same(decoded, effect), effect.ordinal


# --- corrupt args -------------------------------------------------------------------------


def good_args() -> dict[str, Any]:
    encoded = _args.encode(SCOPE, send_delayed(data={"n": 1}), None)
    args: dict[str, Any] = through_json(encoded)
    return args


def test_good_args_decode() -> None:
    scope, effect = _args.decode(good_args())
    assert scope == SCOPE
    assert effect == send_delayed(data={"n": 1})


NOT_AN_OBJECT: list[Any] = [None, [], "args", 5, [["scope", SCOPE]]]


@pytest.mark.parametrize("args", NOT_AN_OBJECT, ids=repr)
def test_args_that_are_not_an_object_are_undecodable(args: Any) -> None:
    with pytest.raises(UndecodableRow):
        _args.decode(args)


MISSING = object()
CORRUPTIONS: list[tuple[str, Any]] = [
    ("scope", MISSING),
    ("scope", ""),
    ("scope", 5),
    ("scope", None),
    ("event", MISSING),
    ("event", ""),
    ("event", ["x"]),
    ("send_id", 7),
    ("ordinal", MISSING),
    ("ordinal", 0),
    ("ordinal", -3),
    ("ordinal", "1"),
    ("ordinal", 1.0),
    ("ordinal", True),
    ("ordinal", None),
    ("delay_ms", MISSING),
    ("delay_ms", -1),
    ("delay_ms", "60000"),
    ("delay_ms", True),
    ("delay_ms", 1.5),
    ("c_index", -1),
    ("c_index", False),
    ("macrostep", True),
    ("macrostep", "1"),
    ("microstep", -1),
    ("round", None),
    ("round", 0.0),
    ("type", 5),
    ("type", ["a"]),
    ("target", 5),
    ("target", "#_" + "x" * 5000),
    ("event", "e" * 5000),
    ("id_from_author", "yes"),
    ("id_from_author", 1),
    ("owner", []),
    ("owner", "onentry"),
    ("owner", {"kind": "onentry"}),
    ("owner", ["onentry", 1]),
    ("owner", ["onentry", 1, 2, 3]),
    ("owner", ["transition", 1, 2]),
    ("owner", ["transition"]),
    ("owner", ["bogus", 1, 2]),
    ("owner", ["ONENTRY", 1, 2]),
    ("owner", ["onentry", -1, 0]),
    ("owner", ["onentry", "1", 0]),
    ("owner", ["onentry", True, 0]),
    ("owner", ["onentry", 0, -1]),
    ("owner", ["finalize", 0, True]),
    ("owner", ["transition", 1.5]),
    ("owner", ["finalize", 1, None]),
    ("owner", [["onentry"], 1, 2]),
    ("owner", [{"onentry": 1}, 1, 2]),
    ("owner", [None, 1]),
    ("data", "raw text"),
    ("data", {"json": 5}),
    ("data", {"t2b64": "g2gA"}),
    ("caller_context", [1, 2]),
    ("caller_context", {"json": "{broken"}),
]


@pytest.mark.parametrize(("key", "value"), CORRUPTIONS, ids=lambda v: repr(v)[:30])
def test_corrupt_args_are_undecodable(key: str, value: Any) -> None:
    args = good_args()
    if value is MISSING:
        del args[key]
    else:
        args[key] = value

    with pytest.raises(UndecodableRow):
        _args.decode(args)


def test_optional_keys_may_be_absent_or_null() -> None:
    args = good_args()
    for key in ["target", "type", "data", "caller_context", "id_from_author"]:
        del args[key]

    _, effect = _args.decode(args)

    assert effect.target is None
    assert effect.type is None
    assert effect.data is None
    assert effect.caller_context is None
    assert effect.id_from_author is False


# --- how a fetch reads the row's JSON -----------------------------------------------------

EDGE_NUMBERS: list[Any] = [
    2**63 - 1,
    -(2**63),
    -(2**63) - 1,  # 19 digits, below what orjson reads as an int: the standard decoder's
    2**64 - 1,
    2**64,
    10**18 - 1,  # 18 digits: orjson's
    -(10**18) + 1,
    1.7976931348623157e308,
    2.2250738585072014e-308,
    0.30000000000000004,
]


@pytest.mark.parametrize("value", TRICKY_VALUES + EDGE_NUMBERS, ids=repr)
def test_a_fetch_reads_json_exactly_as_the_standard_decoder(value: Any) -> None:
    text = json.dumps({"data": value, "list": [value, {"k": value}]})
    for data in (text.encode(), text):
        assert same(read_json(data), json.loads(text))


@settings(max_examples=300, deadline=None)
@given(
    value=st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.integers(-(2**70), 2**70)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
        max_leaves=12,
    )
)
def test_any_json_reads_as_the_standard_decoder_reads_it(value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False)
    assert same(read_json(text.encode()), json.loads(text))


def test_what_orjson_refuses_goes_to_the_standard_decoder() -> None:
    assert math.isinf(read_json(b"[1e400]")[0])
    assert math.isnan(read_json(b"NaN"))
    assert read_json(b'"\\ud800"') == "\ud800"


async def test_the_fetch_hands_the_worker_args_exactly_as_stored(
    oban_client: Oban, pool: AsyncConnectionPool
) -> None:
    config = make_config(oban_client, timers_queue="fetch_exact")
    jobs = await schedule_many(config, SCOPE, DB_EFFECTS)
    ids = [timer.job_id for timer in jobs]
    async with pool.connection() as conn:
        await conn.execute(
            "UPDATE oban_jobs SET state = 'available', scheduled_at = now() WHERE id = ANY(%s)",
            [ids],
        )
    fetched = await _fetch.fetch(
        _oban_compat.FetchRequest(
            pool=pool, prefix="public", queue="fetch_exact", node="n", uuid="u", demand=10
        )
    )
    by_id = {job.id: job for job in fetched.jobs}
    assert set(by_id) == set(ids)
    for timer, effect in zip(jobs, DB_EFFECTS, strict=True):
        scope, decoded = _args.decode(by_id[timer.job_id].args)
        assert scope == SCOPE
        assert same(decoded, effect), effect.ordinal


async def test_the_fetch_hands_the_worker_its_timestamps_aware_and_as_stored(
    oban_client: Oban, pool: AsyncConnectionPool
) -> None:
    config = make_config(oban_client, timers_queue="fetch_times")
    jobs = await schedule_many(config, SCOPE, DB_EFFECTS[:1])
    job_id = jobs[0].job_id
    async with pool.connection() as conn:
        await conn.execute(
            "UPDATE oban_jobs SET state = 'available',"
            " inserted_at = '2026-03-01 10:00:00.123456',"
            " scheduled_at = '2026-03-01 11:30:00.000001' WHERE id = %s",
            [job_id],
        )
    fetched = await _fetch.fetch(
        _oban_compat.FetchRequest(
            pool=pool, prefix="public", queue="fetch_times", node="n", uuid="u", demand=10
        )
    )
    (job,) = fetched.jobs
    assert job.inserted_at == datetime(2026, 3, 1, 10, 0, 0, 123456, tzinfo=UTC)
    assert job.scheduled_at == datetime(2026, 3, 1, 11, 30, 0, 1, tzinfo=UTC)
    assert job.attempted_at is not None
    for moment in (job.inserted_at, job.scheduled_at, job.attempted_at):
        assert moment.tzinfo is not None  # oban's Job would make a naive one aware again
    assert job.completed_at is None
    assert job.cancelled_at is None
    assert job.discarded_at is None
    async with pool.connection() as conn:
        stored = await (
            await conn.execute("SELECT attempted_at FROM oban_jobs WHERE id = %s", [job_id])
        ).fetchone()
    assert stored is not None
    assert job.attempted_at == stored[0].replace(tzinfo=UTC)


def test_a_decoded_effect_is_an_ordinary_send_delayed() -> None:
    """``decode`` builds the effect fast (the engine's builder): still an ordinary frozen,
    hashable ``SendDelayed`` equal to the one encoded."""
    effect = send_delayed(owner=("onexit", 4, 2), data=None, caller_context=None)
    _, decoded = round_trip(effect)
    assert type(decoded) is SendDelayed
    assert decoded == effect
    assert hash(decoded) == hash(effect)
    assert pickle.loads(pickle.dumps(decoded)) == effect  # noqa: S301 - our own bytes
    with pytest.raises(dataclasses.FrozenInstanceError):
        decoded.__setattr__("event", "other")


async def test_a_prepared_timer_is_an_ordinary_record(oban_client: Oban) -> None:
    effect = send_delayed(ordinal=3)
    prepared = _schedule.prepare(make_config(oban_client), SCOPE, effect)
    expected = _schedule.PreparedTimer(SCOPE, effect, prepared.args, True, None)
    assert type(prepared) is _schedule.PreparedTimer
    assert prepared == expected
    assert prepared.args == _args.encode(SCOPE, effect, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        prepared.__setattr__("plain", False)
