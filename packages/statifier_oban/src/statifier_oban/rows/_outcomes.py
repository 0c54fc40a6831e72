"""What a worker answers oban for a job row: the outcomes every worker shares.

A worker resolves the plug-in its row names (:func:`plugin`), refuses a row that names
what this process does not run, or a plug-in of the wrong kind (:func:`refused`:
cancelled at once, the reason on the row naming the field, ``meta.delivery``), bounds its
run by the timeout stored on the row (:func:`bound_seconds`; :func:`timeout_ms` makes a
row whose ``meta.timeout`` no ``Config`` writes undecodable) and turns a delivery's
``Snoozed`` answer into oban's ``Snooze`` (:func:`snooze`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from oban import Cancel, Snooze
from oban.job import Job
from statifier.values import brief

from .._config import MAX_BOUND_MS
from .._errors import ResolutionError, UndecodableRow
from .._names import META_TIMEOUT
from ..delivery import Snoozed
from . import _fields

logger = logging.getLogger("statifier_oban.workers")


type Outcome = Cancel | Snooze | None
"""What a worker's ``process`` returns to oban: cancel the job, snooze it, or complete it."""


def plugin[T](resolver: Callable[[str], T], path: object, default: str, key: str) -> T:
    """The plug-in the job's ``meta.<key>`` names (``default`` if it names none);
    ``ResolutionError`` naming the field if the name is not an import path, is not
    registered, or is not the right plug-in."""
    if path is None:
        path = default
    if not isinstance(path, str):
        raise ResolutionError(f"meta.{key}: {brief(path)} is not an import path")
    try:
        return resolver(path)
    except ResolutionError as exc:
        raise ResolutionError(f"meta.{key}: {exc}") from exc


def refused(job: Job, exc: ResolutionError) -> Cancel:
    """Cancel a job whose row names what this process does not run (logged, reason kept)."""
    logger.warning(
        "job %s (%s) refused: %s",
        job.id,
        job.worker,
        exc,
        extra={"job_id": job.id, "worker": job.worker},
    )
    return Cancel(f"refused: {exc}")


def bound_seconds(job: Job, margin_ms: int = 0, maximum: int = MAX_BOUND_MS) -> float | None:
    """The run-time bound stored on the job's meta, in seconds (None: unbounded).

    What oban asks before it runs the job; a bound no ``Config`` writes is None here (this
    hook must not raise) and the worker's ``process`` cancels the row (``timeout_ms``).
    """
    try:
        value = _fields.bound_ms(job.meta, META_TIMEOUT, maximum)
    except UndecodableRow:
        return None
    return None if value is None else (value + margin_ms) / 1000


def timeout_ms(job: Job, maximum: int = MAX_BOUND_MS) -> int | None:
    """The job's ``meta.timeout`` (None: unbounded); ``UndecodableRow`` if it is not a bound
    a ``Config`` writes (``1..maximum`` milliseconds)."""
    return _fields.bound_ms(job.meta, META_TIMEOUT, maximum)


def snooze(answer: object) -> Snooze | None:
    """oban's ``Snooze`` for a valid ``Snoozed(seconds)`` answer (a positive int), else None."""
    if (
        isinstance(answer, Snoozed)
        and isinstance(answer.seconds, int)
        and not isinstance(answer.seconds, bool)
        and answer.seconds > 0
    ):
        return Snooze(answer.seconds)
    return None
