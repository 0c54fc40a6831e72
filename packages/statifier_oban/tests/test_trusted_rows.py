"""Job rows do not choose what a worker imports or builds (issue 13, ADR 13).

A row comes from storage, which is as untrusted as a user. Each finding of the issue, on a
real queue: a delivery path naming any module (``this``) imports nothing; a class named on
a row (``multiprocessing.pool:Pool``, or a registered module's class that is not a
delivery) is never constructed; a codec cannot inflate a small payload into a large
buffer; each such row is cancelled at once with its reason, never retried. A row whose
JSON no decoder reads is cancelled by the fetch that took it, and never holds back the rows
taken with it.
"""

from __future__ import annotations

import base64
import json
import logging
import multiprocessing
import sys
import tracemalloc
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from statifier_oban import MAX_OPAQUE_BYTES
from statifier_oban._config import MAX_BOUND_MS
from statifier_oban._errors import UndecodableRow
from statifier_oban._names import TIMER_WORKER
from statifier_oban.rows import _fields
from statifier_oban.store import _fetch
from statifier_oban.store._oban_compat import FetchRequest
from statifier_oban.timers import _args, _schedule

from oban_support.common import (
    SETTLED,
    database_fixture,
    execute,
    insert_row,
    wait_for_state,
    wait_until,
)
from oban_support.deliveries import CALLS, ScriptedDelivery
from oban_support.harness import (
    Server,
    scope_fixture,
    send_delayed,
    server_fixture,
    set_due_now,
    set_meta_delivery,
)
from oban_support.row_plugins import BoundedZlibCodec, ConstructionRecorder

database = database_fixture()
server = server_fixture()
scope = scope_fixture("rows")

PROBE = """
from pathlib import Path
Path(__file__).with_suffix(".imported").write_text("imported")


class Delivery:
    def deliver(self, scope, effect):
        from statifier_oban import Delivered
        return Delivered()
"""


@pytest.fixture
def probe(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A module importable from ``sys.path`` that leaves a file behind when imported."""
    name = f"row_probe_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{name}.py").write_text(PROBE)
    sys.path.append(str(tmp_path))
    try:
        yield name, tmp_path / f"{name}.imported"
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(name, None)


async def fire_with_delivery(server: Server, scope: str, delivery: Any) -> Any:
    """Schedule a timer, make its row name ``delivery``, run it; return the settled row."""
    config = server.config(delivery=ScriptedDelivery)
    job = await _schedule.schedule(config, scope, send_delayed(delay_ms=60_000))
    await set_meta_delivery(server.pool, job.job_id, delivery)
    await set_due_now(server.pool, job.job_id)
    return await wait_for_state(server.pool, job.job_id, *SETTLED)


async def test_a_delivery_path_on_a_row_imports_nothing_and_the_row_is_cancelled_at_once(
    server: Server, scope: str, probe: tuple[str, Path]
) -> None:
    module, marker = probe
    assert "this" not in sys.modules
    for value in ("this:s", f"{module}:Delivery", f"{module}.Delivery"):
        row = await fire_with_delivery(server, f"{scope}_{len(value)}", value)
        assert (row.state, row.attempt) == ("cancelled", 1), row.error_text
        assert "refused" in row.error_text
        assert "not registered" in row.error_text
    assert "this" not in sys.modules
    assert module not in sys.modules
    assert not marker.exists()


async def test_a_class_named_on_a_row_is_never_built_unless_it_is_the_plug_in(
    server: Server, scope: str
) -> None:
    pool_imported = "multiprocessing.pool" in sys.modules
    children = set(multiprocessing.active_children())
    for value in ("multiprocessing.pool:Pool", "oban_support.row_plugins:ConstructionRecorder"):
        row = await fire_with_delivery(server, f"{scope}_{len(value)}", value)
        assert (row.state, row.attempt) == ("cancelled", 1), row.error_text
        assert "refused" in row.error_text
    assert ConstructionRecorder.built == []
    assert set(multiprocessing.active_children()) == children
    assert ("multiprocessing.pool" in sys.modules) == pool_imported
    assert CALLS.get(scope, []) == []


def bomb(size: int) -> str:
    """Base64 of ``size`` zero bytes compressed by zlib (about a thousandth of ``size``)."""
    chunk = b"\0" * (1 << 20)
    compressor = zlib.compressobj(9)
    parts = [compressor.compress(chunk) for _ in range(size >> 20)]
    parts.append(compressor.flush())
    return base64.b64encode(b"".join(parts)).decode("ascii")


async def fire_with_data(server: Server, scope: str, stored: dict[str, str]) -> Any:
    """Insert a timer row whose ``data`` is ``stored``; run it; return the settled row."""
    args = _args.encode(scope, send_delayed(), None)
    args["data"] = stored
    job_id = await insert_row(
        server.pool,
        args,
        queue=server.queue,
        worker=TIMER_WORKER,
        meta={"delivery": "oban_support.deliveries:ScriptedDelivery"},
    )
    return await wait_for_state(server.pool, job_id, *SETTLED)


async def test_a_codec_cannot_inflate_a_small_payload_into_a_large_buffer(
    server: Server, scope: str
) -> None:
    big = bomb(300 << 20)  # 300 MB of zeros in about 400 KB of base64
    assert len(big) < 1 << 20
    tracemalloc.start()
    try:
        # The codec: a real codec class of the standard library, not registered.
        foreign = await fire_with_data(
            server, f"{scope}_foreign", {"codec": "encodings.zlib_codec:Codec", "b64": big}
        )
        # A registered codec that bounds itself is given the cap and stops there.
        bounded = await fire_with_data(
            server,
            f"{scope}_bounded",
            {"codec": "oban_support.row_plugins:BoundedZlibCodec", "b64": big},
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (foreign.state, foreign.attempt) == ("cancelled", 1), foreign.error_text
    assert "undecodable" in foreign.error_text
    assert "not registered" in foreign.error_text
    assert (bounded.state, bounded.attempt) == ("cancelled", 1), bounded.error_text
    assert "over" in bounded.error_text
    assert BoundedZlibCodec.caps == [MAX_OPAQUE_BYTES]
    assert peak < 4 * MAX_OPAQUE_BYTES, peak


async def test_an_unbounded_registered_codec_still_has_its_result_capped(
    server: Server, scope: str
) -> None:
    stored = {
        "codec": "oban_support.row_plugins:ZlibCodec",
        "b64": bomb(MAX_OPAQUE_BYTES + (1 << 20)),
    }
    row = await fire_with_data(server, scope, stored)
    assert (row.state, row.attempt) == ("cancelled", 1), row.error_text
    assert "undecodable" in row.error_text
    assert "over" in row.error_text
    assert CALLS.get(scope, []) == []


@pytest.mark.parametrize(
    "delivery",
    [
        "statifier_oban.delivery:SessionInvokeDelivery",
        "statifier_oban.executions:ExecutionInvokeDelivery",
    ],
)
async def test_a_registered_delivery_of_the_wrong_kind_is_refused_on_first_sight(
    server: Server, scope: str, delivery: str
) -> None:
    """An invoke delivery has a ``deliver`` too, taking other arguments: named on a timer
    row, it is refused before it is called (it once raised ``TypeError``, retried until
    discarded)."""
    row = await fire_with_delivery(server, scope, delivery)
    assert (row.state, row.attempt) == ("cancelled", 1), row.error_text
    assert f"refused: meta.delivery: '{delivery}' is not a timer delivery" in row.error_text
    assert CALLS.get(scope, []) == []


@pytest.mark.parametrize(
    ("timeout", "shown"),
    [("1" + "0" * 400, "<int of 1329 bits>"), ("0", "0"), ('"5000"', "'5000'")],
)
async def test_a_timeout_no_config_writes_is_cancelled_on_first_sight(
    server: Server, scope: str, timeout: str, shown: str
) -> None:
    """``meta.timeout = 10**400`` once raised ``OverflowError`` in oban's timeout hook,
    retried until discarded; a bound no ``Config`` writes is a malformed row."""
    config = server.config(delivery=ScriptedDelivery)
    job = await _schedule.schedule(config, scope, send_delayed(delay_ms=60_000))
    await execute(
        server.pool,
        "UPDATE oban_jobs SET meta = jsonb_set(meta, '{timeout}', %s::jsonb),"
        " scheduled_at = timezone('UTC', now()) WHERE id = %s",
        [timeout, job.job_id],
    )
    row = await wait_for_state(server.pool, job.job_id, *SETTLED)
    assert (row.state, row.attempt) == ("cancelled", 1), row.error_text
    assert (
        f"undecodable: meta.timeout must be an integer of milliseconds in 1..{MAX_BOUND_MS},"
        f" found {shown}"
    ) in row.error_text
    assert CALLS.get(scope, []) == []


def test_a_timeout_is_read_within_its_bounds() -> None:
    assert _fields.bound_ms({}, "timeout", 100) is None
    assert _fields.bound_ms({"timeout": None}, "timeout", 100) is None
    assert _fields.bound_ms(["not", "an", "object"], "timeout", 100) is None
    assert _fields.bound_ms({"timeout": 1}, "timeout", 100) == 1
    assert _fields.bound_ms({"timeout": 100}, "timeout", 100) == 100
    for bad in (0, 101, -1, True, 1.5, "50"):
        with pytest.raises(UndecodableRow, match=r"meta\.timeout must be"):
            _fields.bound_ms({"timeout": bad}, "timeout", 100)


DEEP = "[" * 3000 + "]" * 3000
"""JSON that jsonb stores and Python's decoder cannot read: nested 3,000 deep."""

LONG_INT = "1" * 5000
"""An integer of more digits than ``int()`` reads from text (4,300)."""


async def insert_json_rows(
    server: Server, queue: str, rows: list[tuple[str, str, str]], worker: str = TIMER_WORKER
) -> list[int]:
    """Insert jobs whose args, meta and errors are these JSON texts, available at once, in
    one transaction (one fetch sees them all); their ids, in order."""
    ids: list[int] = []
    async with server.pool.connection() as conn, conn.transaction():
        for args, meta, errors in rows:
            cursor = await conn.execute(
                "INSERT INTO oban_jobs (args, meta, errors, queue, worker, state, scheduled_at)"
                " VALUES (%s::jsonb, %s::jsonb, %s::jsonb, %s, %s, 'available',"
                " timestamp '2000-01-01') RETURNING id",
                [args, meta, errors, queue, worker],
            )
            ids.extend(row[0] for row in await cursor.fetchall())
    return ids


async def outcomes(server: Server, ids: list[int]) -> list[tuple[str, int, str | None]]:
    """Each job's state, attempt and last error, read without decoding its other JSON."""
    async with server.pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT state::text, attempt, errors->-1->>'error' FROM oban_jobs"
            " WHERE id = ANY(%s) ORDER BY id",
            [ids],
        )
        return [(state, attempt, error) for state, attempt, error in await cursor.fetchall()]


async def test_a_fetch_cancels_each_row_it_cannot_read_and_returns_the_rows_taken_with_it(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    queue = f"{server.queue}_unread"  # no producer runs it: only this fetch takes its rows
    ids = await insert_json_rows(
        server,
        queue,
        [
            ('{"n": 1}', "{}", "[]"),
            (f'{{"n": {DEEP}}}', "{}", "[]"),
            ('{"n": 3}', f'{{"big": {LONG_INT}}}', "[]"),
            ('{"n": 4}', "{}", f"[{DEEP}]"),
            ('{"n": 5}', '{"m": 5}', '[{"attempt": 1}]'),
        ],
    )
    request = FetchRequest(
        pool=server.pool, prefix="public", queue=queue, node="n", uuid="u", demand=10
    )
    with caplog.at_level(logging.WARNING, logger="statifier_oban.fetch"):
        fetched = await _fetch.fetch(request)

    taken: list[tuple[Any, ...]] = [
        (job.id, job.args, job.meta, job.errors) for job in fetched.jobs
    ]
    assert taken == [
        (ids[0], {"n": 1}, {}, []),
        (ids[4], {"n": 5}, {"m": 5}, [{"attempt": 1}]),
    ]
    assert fetched.exhausted  # 5 rows there to take, 10 asked for
    found = await outcomes(server, ids)
    assert [row[:2] for row in found] == [
        ("executing", 1),
        ("cancelled", 1),
        ("cancelled", 1),
        ("cancelled", 1),
        ("executing", 1),
    ]
    assert found[1][2] == "cancelled: its args column holds JSON nested too deeply to read"
    assert found[2][2] is not None
    assert found[2][2].startswith(
        "cancelled: its meta column cannot be read as JSON: Exceeds the limit (4300 digits)"
    )
    assert len(found[2][2]) < 300  # the decoder's message clipped
    assert found[3][2] == "cancelled: its errors column holds JSON nested too deeply to read"
    logged = [r.getMessage() for r in caplog.records if r.name == "statifier_oban.fetch"]
    assert len(logged) == 3
    for job_id, message in zip(ids[1:4], logged, strict=True):
        assert message.startswith(f"job {job_id} of queue {queue} cancelled: its ")
    # The attempt is fenced: a second producer's fetch of the same queue finds nothing.
    again = await _fetch.fetch(request)
    assert again.jobs == []


async def test_a_row_no_decoder_reads_does_not_hold_back_a_timer_fetched_with_it(
    server: Server, scope: str
) -> None:
    args = _args.encode(scope, send_delayed(), None)
    meta = {"delivery": "oban_support.deliveries:ScriptedDelivery"}
    good, poison = await insert_json_rows(
        server,
        server.queue,
        [(json.dumps(args), json.dumps(meta), "[]"), (f'{{"n": {DEEP}}}', "{}", "[]")],
    )
    row = await wait_for_state(server.pool, good, *SETTLED)
    assert (row.state, row.attempt) == ("completed", 1), row.error_text
    assert [effect.event for effect in CALLS[scope]] == ["authorization.expired"]

    async def poison_settled() -> list[tuple[str, int, str | None]] | None:
        (found,) = await outcomes(server, [poison])
        return [found] if found[0] != "executing" and found[0] != "available" else None

    ((state, attempt, error),) = await wait_until(poison_settled, what="the unreadable row")
    assert (state, attempt) == ("cancelled", 1)
    assert error == "cancelled: its args column holds JSON nested too deeply to read"
