"""Typed errors raised by the engine's public API."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One problem found while compiling a chart.

    ``code`` is a stable machine-readable slug (``unknown-element``, ``unknown-target``...),
    ``line``/``column`` are 1-based positions in the source (0 when unknown), and
    ``severity`` is ``"error"`` (blocks compilation) or ``"warning"``. ``file`` names the
    file the position is in when it is not the chart's source: the Python file whose line
    made the element of a chart written with ``statifier.build``.
    """

    code: str
    message: str
    line: int = 0
    column: int = 0
    severity: str = "error"
    file: str | None = None

    def format(self, filename: str = "<chart>") -> str:
        """``file:line:col: severity: message [code]``, as compilers print it (``file`` is
        the diagnostic's own when it has one, else ``filename``)."""
        where = self.file if self.file is not None else filename
        return f"{where}:{self.line}:{self.column}: {self.severity}: {self.message} [{self.code}]"

    @property
    def where(self) -> str:
        """``line:col``, preceded by ``file:`` when the diagnostic names its own file."""
        position = f"{self.line}:{self.column}"
        return position if self.file is None else f"{self.file}:{position}"


class StatifierError(Exception):
    """Base class of every error the engine raises."""


class ChartError(StatifierError):
    """A chart could not be compiled; ``diagnostics`` lists every error found."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = tuple(diagnostics)
        first = diagnostics[0] if diagnostics else None
        summary = f"{len(diagnostics)} error(s) in chart"
        if first is not None:
            summary += f"; first at {first.where}: {first.message}"
        super().__init__(summary)


class NotRunningError(StatifierError):
    """An event was handed to an execution that is no longer running."""


class PositionError(StatifierError):
    """Base class of the errors ``statifier.core.position`` raises."""


class ExecutionResourceError(StatifierError):
    """One call of the core ran out of memory or stack; it had no effect.

    The state handed to the call is unchanged. ``resource`` is ``"memory"`` or
    ``"stack depth"``. Charts are bounded by their macrostep budget (ADR 0011), so this
    means the budget is set too high for the process, or the host handed in a value that
    is too large.
    """

    def __init__(self, session_id: str, resource: str) -> None:
        self.session_id = session_id
        self.resource = resource
        super().__init__(f"execution {session_id} ran out of {resource}; the call had no effect")


def install_hint(distribution: str, extra: str | None = None) -> str:
    """``pip install 'statifier-oban[persistence]'``: the end of every error about a
    missing optional package, naming the exact distribution and extra to install."""
    requirement = f"{distribution}[{extra}]" if extra else distribution
    return f"pip install '{requirement}'"
