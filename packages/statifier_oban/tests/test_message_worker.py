"""``MessageWorker`` on a job row it cannot read: cancelled, and logged within a bound.

No database: a row without a usable ``scope`` is refused before the worker steps anything.
"""

from __future__ import annotations

import logging

import pytest
from oban import Cancel
from oban.job import Job
from statifier.values import BRIEF_LENGTH
from statifier_oban.executions import MessageWorker

MESSAGE_WORKER = "statifier_oban.executions.MessageWorker"


async def test_an_undecodable_row_is_logged_briefly_however_large_its_args(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A row's args are as large as whoever wrote it made them: the log line is not.
    job = Job(id=7, worker=MESSAGE_WORKER, args={"scope": 1, "junk": "A" * 5_000_000})
    with caplog.at_level(logging.WARNING, logger="statifier_oban.executions"):
        outcome = await MessageWorker().process(job)
    assert isinstance(outcome, Cancel)
    assert "undecodable" in outcome.reason
    (record,) = [r for r in caplog.records if "undecodable" in r.getMessage()]
    line = record.getMessage()
    assert line.startswith("message job 7 is undecodable: {'scope': 1, 'junk': 'AAA")
    assert len(line) < BRIEF_LENGTH + 100
    assert getattr(record, "job_id", None) == 7
