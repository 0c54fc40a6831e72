"""Resource limits of the ECMAScript sandbox (ADR 10)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class Limits:
    """What one call into the JavaScript engine may use.

    ``cpu_seconds`` bounds each call (an evaluation, a script, the conversion of the values
    it changed); ``memory_bytes`` bounds the engine's whole heap, the installed variables
    included; ``stack_bytes`` bounds recursion. A call that reaches a limit fails with
    ``error.execution``, changes nothing, and the engine is rebuilt from the stored values.

    A macrostep-wide budget (issue 13) threads in here: the caller passes the remaining
    budget's ``Limits`` for each call (``cpu_seconds`` = min(per-evaluation, remaining)).
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
