"""Testing charts: drive a chart in virtual time and check it, with failures that explain.

``start(chart)`` runs a chart on the virtual driver (``statifier.virtual``) from ``t=0``
and returns a :class:`ChartRun`: send events with data, ``advance("7d")`` to let a week
pass in no time (every timer due on the way fires, in order), answer the chart's
invocations, and check the active states, the datamodel, the effects raised and the
timers pending. A failed check raises :class:`ChartAssertionError` (an
``AssertionError``) whose message shows the configuration, the datamodel, the last
events, the pending timers and the errors raised. A chart that raises an ``error.*``
event the test did not allow or expect fails the action that raised it
(:class:`UnexpectedChartError`).

With pytest, the fixture ``chart_run`` (a factory with ``start``'s arguments) comes from
statifier's pytest plugin, which pytest loads by itself once statifier is installed (its
entry point is ``statifier``: ``-p no:statifier`` turns it off); a failed test's report
then shows where each of its runs stood. :func:`explore` checks more than examples: every
state reachable within a bound. Durable executions have a time-skipping environment of
their own, ``statifier_oban.testing``. :class:`HttpReceiver` is a loopback HTTP server
that records the POSTs a chart's BasicHTTP sends make. See the testing page of the
documentation.
"""

from __future__ import annotations

from statifier.testing._errors import ChartAssertionError, UnexpectedChartError
from statifier.testing._explore import (
    DEFAULT_MAX_STATES,
    MAX_STATES_LIMIT,
    ErrorFound,
    Exploration,
    explore,
)
from statifier.testing._receiver import HttpReceiver, ReceivedRequest
from statifier.testing._run import (
    DEFAULT_SESSION_ID,
    MAX_EVENTS_KEPT,
    ChartRun,
    HeardEvent,
    Step,
    start,
)
from statifier.testing._watch import ErrorWatch

__all__ = [
    "DEFAULT_MAX_STATES",
    "DEFAULT_SESSION_ID",
    "MAX_EVENTS_KEPT",
    "MAX_STATES_LIMIT",
    "ChartAssertionError",
    "ChartRun",
    "ErrorFound",
    "ErrorWatch",
    "Exploration",
    "HeardEvent",
    "HttpReceiver",
    "ReceivedRequest",
    "Step",
    "UnexpectedChartError",
    "explore",
    "start",
]
