"""Prompt staging and lean producers: timers fire within milliseconds of their time.

oban 0.7.0 moves due ``scheduled`` jobs to ``available`` in its Stager, polling every
``stager.interval`` (1 s by default), and its staging statement decides which queues to
wake from a snapshot taken *before* its own update, so a job it just staged waits for the
next tick (ADR 6). ``install()`` registers, through oban's ``stager.build`` hook, a
:class:`PromptStager` that sleeps until the next timer is due instead of polling:

* each step (``sql/stage_jobs.sql``, one autocommit statement) stages what is due,
  announces each queue it staged into on oban's insert channel (every node's producers of
  that queue wake up), wakes the local producers of queues that already had available
  jobs, and reads the next due time;
* the Stager then rests until that time, at least :data:`MIN_GAP_S` after the step (a
  stream of timers is staged in batches) and at most its interval (default
  :data:`DEFAULT_INTERVAL_S`, never more than :data:`ANNOUNCE_HORIZON_S`);
* a timer scheduled to fire sooner than :data:`ANNOUNCE_HORIZON_S` is announced on
  oban's notifier channel ``statifier_timer_due`` with its due time, which cuts the rest short.
  A later one is found by a step before it is due, because no rest is longer than the
  horizon.

``install()`` also makes every producer write its acks in one statement
(``statifier_oban.store._acks``) and fetch in one statement, without looking again for jobs
nobody announced (``statifier_oban.store._fetch``); ADR 18 has the reasons and the figures. It
runs when ``statifier_oban`` is imported, so import the package before constructing the
``Oban`` instance that runs the timers queue.

Public because it changes every ``Oban`` built afterwards in the process: a host can
check it (:func:`installed`) or go back to oban's own Stager, acks and fetch
(:func:`uninstall`).

The code lives in ``statifier_oban.store._latency``, in the oban seam.
"""

from __future__ import annotations

from .store._latency import (
    ANNOUNCE_HORIZON_S,
    DEFAULT_INTERVAL_S,
    MIN_GAP_S,
    PromptStager,
    install,
    installed,
    uninstall,
)

__all__ = [
    "ANNOUNCE_HORIZON_S",
    "DEFAULT_INTERVAL_S",
    "MIN_GAP_S",
    "PromptStager",
    "install",
    "installed",
    "uninstall",
]
