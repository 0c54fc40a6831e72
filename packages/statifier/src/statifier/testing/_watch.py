"""``ErrorWatch``: which ``error.*`` events a test allows or expects, and the failure for
the rest. ``ChartRun`` keeps one; so does ``statifier_oban.testing``'s environment."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from statifier.core.effects import ErrorRaised
from statifier.core.events import name_matches
from statifier.testing._errors import ChartAssertionError, UnexpectedChartError
from statifier.values import brief


@dataclass
class _Expectation:
    """An ``expect`` block: its descriptor, and the errors it matched so far."""

    descriptor: str
    matched: list[ErrorRaised] = field(default_factory=list)


class ErrorWatch:
    """The ``error.*`` events a test tolerates (``allow``) or requires (``expect``).

    Descriptors match as SCXML event descriptors do: ``"error.execution"`` matches
    ``error.execution`` and ``error.execution.*``, ``"error"`` every error event.
    """

    def __init__(self, allowed: Iterable[str] = ()) -> None:
        self._allowed: list[str] = list(allowed)
        self._expected: list[_Expectation] = []

    def allow(self, *descriptors: str) -> None:
        """Tolerate errors matching these descriptors from now on."""
        self._allowed.extend(descriptors)

    @contextmanager
    def expect(self, descriptor: str, describe: Callable[[], str]) -> Iterator[list[ErrorRaised]]:
        """Inside the block, errors matching ``descriptor`` are expected, and at least one
        must come: yields the list of those that matched, filled as they are sifted; at
        the end, raises ``ChartAssertionError`` (its message ending with ``describe()``)
        if none did."""
        expectation = _Expectation(descriptor)
        self._expected.append(expectation)
        try:
            yield expectation.matched
        finally:
            self._expected.remove(expectation)
        if not expectation.matched:
            raise ChartAssertionError(
                f"expected an error matching {descriptor!r}; none was raised\n" + describe()
            )

    def sift(self, errors: Iterable[tuple[str, ErrorRaised]]) -> list[tuple[str, ErrorRaised]]:
        """The errors (``(session or execution id, effect)``) neither expected nor allowed;
        the expected ones are recorded with their ``expect`` block."""
        unexpected = []
        for where, error in errors:
            expectation = next(
                (e for e in self._expected if name_matches((e.descriptor,), error.name)), None
            )
            if expectation is not None:
                expectation.matched.append(error)
            elif not name_matches(tuple(self._allowed), error.name):
                unexpected.append((where, error))
        return unexpected

    def check(
        self,
        errors: Iterable[tuple[str, ErrorRaised]],
        *,
        during: str,
        top: str | None,
        describe: Callable[[], str],
    ) -> None:
        """Raise ``UnexpectedChartError`` for the errors ``sift`` leaves (``during``
        names the action; errors of ``top`` are shown without their id)."""
        self.raise_unexpected(self.sift(errors), during=during, top=top, describe=describe)

    @staticmethod
    def raise_unexpected(
        unexpected: list[tuple[str, ErrorRaised]],
        *,
        during: str,
        top: str | None,
        describe: Callable[[], str],
    ) -> None:
        """Raise ``UnexpectedChartError`` for ``unexpected`` (errors ``sift`` left), if
        there are any; its message ends with ``describe()``."""
        if not unexpected:
            return
        shown = "\n".join(f"  {error_line(error, where, top)}" for where, error in unexpected)
        count = len(unexpected)
        raise UnexpectedChartError(
            f"the chart raised {count} unexpected error event{'s' if count != 1 else ''} "
            f"during {during!r} (allow them with allow_errors(...) or expect them with "
            f"expect_error(...)):\n{shown}\n" + describe(),
            tuple(unexpected),
        )


def error_line(error: ErrorRaised, where: str, top: str | None) -> str:
    """``[where] error.execution at line 6 (send_id x): message`` (``where`` left out when
    it is ``top``; the message cut short)."""
    prefix = "" if where == top else f"[{where}] "
    line = f" at line {error.line}" if error.line is not None else ""
    sendid = f" (send_id {error.sendid})" if error.sendid else ""
    return f"{prefix}{error.name}{line}{sendid}: {brief(error.message or '(no message)', 200)}"
