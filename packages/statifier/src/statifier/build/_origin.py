"""Where each element of a built chart was made: the Python file and line of the call.

Every constructor of ``statifier.build`` records its caller, the first frame outside this
package, so that a problem the compiler finds in the exported SCXML is reported at the
Python line that made the element, not at a line of generated XML.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from types import CodeType

from statifier.errors import StatifierError

_PACKAGE = __name__.rpartition(".")[0]


@dataclass(frozen=True, slots=True)
class Origin:
    """A Python source position: ``file`` (as the code object names it), 1-based ``line``
    and ``column`` (0 when unknown) of the call."""

    file: str
    line: int
    column: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


UNKNOWN = Origin("<unknown>", 0)
"""The origin of an element made where no Python frame can be seen."""


def caller() -> Origin:
    """The position of the innermost call from outside ``statifier.build`` on the stack."""
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__")
        if not isinstance(module, str) or not (
            module == _PACKAGE or module.startswith(_PACKAGE + ".")
        ):
            code = frame.f_code
            line = frame.f_lineno or 0
            start = _positions(code)[frame.f_lasti // 2]
            column = start[2] + 1 if start[0] == line and start[2] is not None else 0
            return Origin(code.co_filename, line, column)
        frame = frame.f_back  # type: ignore[assignment]
    return UNKNOWN


@functools.lru_cache(maxsize=16)
def _positions(code: CodeType) -> tuple[tuple[int | None, int | None, int | None, int | None], ...]:
    """The source positions of ``code``'s instructions. Read once per code object: a module
    that builds a large chart makes many calls from one code object, and walking its
    positions again for each call would cost time quadratic in the module's size."""
    return tuple(code.co_positions())


class BuildError(StatifierError):
    """A builder was called with something it cannot make an element of: a child that is
    not an element, a value that is not JSON-like, a delay that is not whole milliseconds,
    text that XML cannot hold.

    ``origin`` is the Python line of the call. What a chart *means* (targets, ids, where
    an element may stand) is checked by the compiler, whose ``ChartError`` names the same
    lines.
    """

    def __init__(self, origin: Origin, message: str) -> None:
        self.origin = origin
        super().__init__(f"{origin}: {message}")
