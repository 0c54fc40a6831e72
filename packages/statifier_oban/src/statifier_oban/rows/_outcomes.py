"""What a worker answers oban for a job row: the outcomes every worker shares.

A worker resolves the plug-in its row names (:func:`plugin`), refuses a row that names
what this process does not run (:func:`refused`: cancelled at once, the reason on the
row), bounds its run by the timeout stored on the row (:func:`bound_seconds`) and turns a
delivery's ``Snoozed`` answer into oban's ``Snooze`` (:func:`snooze`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from oban import Cancel, Snooze
from oban.job import Job

from .._errors import ResolutionError
from .._names import META_TIMEOUT
from ..delivery import Snoozed

logger = logging.getLogger("statifier_oban.workers")


type Outcome = Cancel | Snooze | None
"""What a worker's ``process`` returns to oban: cancel the job, snooze it, or complete it."""


def plugin[T](resolver: Callable[[str], T], path: object, default: str, what: str) -> T:
    """The plug-in a job's meta names (``default`` if it names none); ``ResolutionError``
    if the name is not an import path, is not registered, or is not the right plug-in."""
    if path is None:
        path = default
    if not isinstance(path, str):
        shown = repr(path)
        shown = shown if len(shown) <= 120 else shown[:117] + "..."
        raise ResolutionError(f"the job names its {what} with {shown}, not an import path")
    try:
        return resolver(path)
    except ResolutionError as exc:
        raise ResolutionError(f"{what}: {exc}") from exc


def refused(job: Job, exc: ResolutionError) -> Cancel:
    """Cancel a job whose row names what this process does not run (logged, reason kept)."""
    logger.warning("job %s (%s) refused: %s", job.id, job.worker, exc)
    return Cancel(f"refused: {exc}")


def bound_seconds(job: Job, margin_ms: int = 0) -> float | None:
    """The run-time bound stored on the job's meta, in seconds (None: unbounded)."""
    value = job.meta.get(META_TIMEOUT) if isinstance(job.meta, dict) else None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return (value + margin_ms) / 1000


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
