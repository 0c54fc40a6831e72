"""``executions.pending_jobs`` on job rows as anyone may have written them, on real
PostgreSQL.

What it reads is shown by ``executions show``, the console and the API: a row's text comes
back within ``MAX_ROW_STRING`` characters or not at all, a row it cannot read lists with
the unreadable field absent and a due time no ``datetime`` holds is clamped, instead of
one such row failing the whole listing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier_oban._names import INVOKE_WORKER
from statifier_oban.executions import PendingJob, pending_jobs
from statifier_oban.rows._fields import MAX_ROW_STRING

from oban_support.common import unique
from oban_support.effects_factory import insert_raw

HUGE = 3_000_000
"""Characters of an event name no index limits."""

INDEXED = 100_000
"""Characters of a send_id or invoke_id that compress within an index entry's bound."""


def timer_args(scope: str, ordinal: Any, **fields: Any) -> dict[str, Any]:
    """The args ``pending_jobs`` reads of a timer row (the rest of a row is not read)."""
    return {"scope": scope, "ordinal": ordinal, "send_id": "s", "event": "e", **fields}


async def listed(oban: Oban, scope: str) -> dict[int, PendingJob]:
    """The scope's pending jobs by job id."""
    return {job.job_id: job for job in await pending_jobs(oban, scope)}


async def test_text_fields_come_back_within_the_row_string_bound_or_not_at_all(
    oban_client: Oban, pool: AsyncConnectionPool
) -> None:
    scope = unique()
    at_bound = "b" * MAX_ROW_STRING
    kept = await insert_raw(pool, args=timer_args(scope, 1, send_id=at_bound, event=at_bound))
    huge = await insert_raw(
        pool, args=timer_args(scope, 2, send_id="s" * INDEXED, event="e" * HUGE)
    )
    over = await insert_raw(pool, args=timer_args(scope, 3, event="o" * (MAX_ROW_STRING + 1)))
    invocation = await insert_raw(
        pool,
        args={"scope": scope, "invoke_id": "i" * INDEXED},
        worker=INVOKE_WORKER,
        state="available",
    )
    jobs = await listed(oban_client, scope)
    assert set(jobs) == {kept, huge, over, invocation}
    assert (jobs[kept].send_id, jobs[kept].event, jobs[kept].ordinal) == (at_bound, at_bound, 1)
    # Listed all the same: the operator sees the job and its due time, not its text.
    assert (jobs[huge].kind, jobs[huge].send_id, jobs[huge].event) == ("timer", None, None)
    assert jobs[huge].ordinal == 2
    assert (jobs[over].send_id, jobs[over].event) == ("s", None)
    assert (jobs[invocation].kind, jobs[invocation].invoke_id) == ("invocation", None)


async def test_an_ordinal_that_is_no_decimal_integer_is_absent_and_the_rest_still_lists(
    oban_client: Oban, pool: AsyncConnectionPool
) -> None:
    scope = unique()
    good = await insert_raw(pool, args=timer_args(scope, 7))
    # "²" passes str.isdigit but not int(); "٣" (an Arabic-Indic three) passes int() but
    # is no ordinal a step writes; 5,000 digits are past int()'s default digit limit.
    odd = [await insert_raw(pool, args=timer_args(scope, text)) for text in ("²", "٣", "-1")]
    odd.append(await insert_raw(pool, args=timer_args(scope, 1.5)))
    long_ordinal = f'{{"scope": "{scope}", "ordinal": {"1" * 5000}, "send_id": "s"}}'
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "INSERT INTO oban_jobs (worker, queue, args, state)"
            " SELECT worker, queue, %s::jsonb, state FROM oban_jobs WHERE id = %s RETURNING id",
            [long_ordinal, good],
        )
        row = await cursor.fetchone()
    assert row is not None
    odd.append(int(row[0]))
    jobs = await listed(oban_client, scope)
    assert set(jobs) == {good, *odd}
    assert jobs[good].ordinal == 7
    assert [jobs[job_id].ordinal for job_id in odd] == [None] * len(odd)
    assert [jobs[job_id].send_id for job_id in odd] == ["s"] * len(odd)


async def test_a_due_time_no_datetime_holds_is_clamped_and_the_rest_still_lists(
    oban_client: Oban, pool: AsyncConnectionPool
) -> None:
    scope = unique()
    good = await insert_raw(pool, args=timer_args(scope, 1))
    early, late, far = [await insert_raw(pool, args=timer_args(scope, n)) for n in (2, 3, 4)]
    async with pool.connection() as conn:
        for job_id, moment in ((early, "-infinity"), (late, "infinity"), (far, "20000-01-01")):
            await conn.execute(
                "UPDATE oban_jobs SET scheduled_at = %s::timestamp WHERE id = %s",
                [moment, job_id],
            )
    jobs = await pending_jobs(oban_client, scope)
    assert [job.job_id for job in jobs] == [early, good, far, late]
    assert jobs[0].scheduled_at == datetime.min
    assert jobs[2].scheduled_at == jobs[3].scheduled_at == datetime.max
