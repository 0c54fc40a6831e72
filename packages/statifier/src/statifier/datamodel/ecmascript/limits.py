"""Resource limits of the ECMAScript sandbox (ADR 22)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class Limits:
    """What one chart instance's engine may use.

    ``cpu_seconds`` bounds each call (an evaluation, a script, a write); ``memory_bytes``
    bounds the instance's whole heap (its own: every instance has a runtime of its own);
    ``stack_bytes`` bounds recursion. A call that reaches a limit fails with
    ``error.execution`` and changes nothing. The macrostep's budget (ADR 11) charges each
    call too (``compiled.CALL_COST``).
    """

    cpu_seconds: float = 1.0
    memory_bytes: int = 64 * 1024 * 1024
    stack_bytes: int = 512 * 1024

    def __post_init__(self) -> None:
        if self.cpu_seconds <= 0 or self.memory_bytes <= 0 or self.stack_bytes <= 0:
            raise ValueError("every limit must be positive")


DEFAULT_LIMITS: Final = Limits()
"""The limits every evaluation runs under unless a caller narrows them."""

MAX_SOURCE_LENGTH: Final = 10_000
"""Longest accepted expression or location source, in characters."""

MAX_SCRIPT_SOURCE_LENGTH: Final = 100_000
"""Longest accepted script source, in characters."""

MAX_CACHED_FUNCTIONS: Final = 4096
"""Compiled expressions and locations kept per engine before the cache is reset."""

ENCODE_SECONDS: Final = 10.0
"""CPU time a whole-datamodel encode or decode may take (its cost grows with the datamodel,
which ``datamodel_bytes`` bounds; an ordinary call keeps ``Limits.cpu_seconds``)."""

MAX_JOBS: Final = 10_000
"""Promise jobs one call may run before it fails (a chain that keeps queueing jobs)."""

MAX_HOST_CALLS: Final = 64
"""Distinct host function calls one evaluation may make (each reruns it, ADR 22)."""
