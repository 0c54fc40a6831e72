""" "Did you mean ...?": the closest known spelling of a mistyped name."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name most like ``name``, if any is close enough to be a likely typo."""
    matches = difflib.get_close_matches(name, sorted(set(known)), n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest known name, or ``""`` when none is close."""
    match = closest(name, known)
    return f"; did you mean {match!r}?" if match is not None else ""
