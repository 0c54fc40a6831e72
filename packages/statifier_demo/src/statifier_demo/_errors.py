"""Typed errors of the demo."""

from __future__ import annotations


class StatifierDemoError(Exception):
    """Base class of every error the demo raises."""


class ChartNotFound(StatifierDemoError, FileNotFoundError):
    """The card-authorization chart is not where the demo looks for it."""


class PhaseFailed(StatifierDemoError):
    """The phase could not do what it is for; the message says what and is shown as is."""
