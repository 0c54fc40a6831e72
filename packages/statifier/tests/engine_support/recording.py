"""``Recording``: a ``statifier.instrumentation.Instrumentation`` that records its spans.

Each span is a ``Recorded`` (operation, facts, the parent it was given, the context it
captured or continued); the "context" is this recorder's own token, the id of the span
current when it was captured, so a test can say which span became whose parent.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from statifier import instrumentation


@dataclass
class Recorded:
    """One span: its number, operation, facts, and what its parent was given as."""

    number: int
    operation: str
    facts: dict[str, Any]
    parent: object
    carried: object
    within: int | None
    """The span current when it started (the default parent)."""

    def set(self, **facts: object) -> None:
        """Add facts."""
        self.facts.update(facts)

    def recording(self) -> bool:
        """Always: a test reads every fact."""
        return True


@dataclass
class Recording:
    """Records spans; ``capture`` answers the number of the current span."""

    spans: list[Recorded] = field(default_factory=list)
    stack: list[int] = field(default_factory=list)

    @contextlib.contextmanager
    def span(
        self, operation: str, *, parent: object = None, carried: object = None, **facts: Any
    ) -> Iterator[Recorded]:
        """Record a span; it is current inside the block."""
        within = self.stack[-1] if self.stack else None
        made = Recorded(len(self.spans) + 1, operation, facts, parent, carried, within)
        self.spans.append(made)
        self.stack.append(made.number)
        try:
            yield made
        finally:
            self.stack.pop()

    def carrier(self) -> dict[str, str] | None:
        """The current span's number as a carrier."""
        return {"span": str(self.stack[-1])} if self.stack else None

    def capture(self) -> object:
        """The current span's number (None outside a span)."""
        return self.stack[-1] if self.stack else None

    @contextlib.contextmanager
    def continued(self, carrier: Mapping[str, str]) -> Iterator[None]:
        """Continue nothing: recorded spans have no remote parents."""
        yield

    def ids(self) -> tuple[str, str] | None:
        """The current span's number as both ids."""
        return (f"t{self.stack[-1]}", f"s{self.stack[-1]}") if self.stack else None


def recording() -> contextlib.AbstractContextManager[instrumentation.Instrumentation | None]:
    """A fresh ``Recording`` installed for the block."""
    return instrumentation.installed(Recording())
