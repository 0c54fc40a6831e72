"""Typed errors of the demo."""

from __future__ import annotations


class StatifierDemoError(Exception):
    """Base class of every error the demo raises."""


class ChartNotFound(StatifierDemoError, FileNotFoundError):
    """The card-authorization chart is not where the demo looks for it."""


class StepFailed(StatifierDemoError):
    """A step the host made was not applied (the message says what it answered)."""
