"""The failures ``statifier.testing`` raises: assertion errors that tell where the run stood."""

from __future__ import annotations

from statifier.core.effects import ErrorRaised
from statifier.errors import StatifierError


class ChartAssertionError(StatifierError, AssertionError):
    """A check of a chart under test failed.

    An ``AssertionError`` (pytest reports it as a failed check), whose message says what
    was expected and where the run stood: the configuration, the datamodel, the last
    events, the pending timers and open invocations, the errors raised.
    """


class UnexpectedChartError(ChartAssertionError):
    """The chart raised an ``error.*`` event the test did not say it expects.

    ``errors`` holds each one as ``(session_id, ErrorRaised effect)``. Allow errors with
    ``allow_errors(...)`` or ``with run.expect_error(...)``.
    """

    def __init__(self, message: str, errors: tuple[tuple[str, ErrorRaised], ...]) -> None:
        super().__init__(message)
        self.errors = errors
