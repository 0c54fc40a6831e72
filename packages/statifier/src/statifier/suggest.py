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


def one_edit_apart(a: str, b: str) -> bool:
    """Whether ``b`` is ``a`` with one character inserted, deleted, replaced, or two
    neighbours swapped (``timout``/``timeout``, ``recieved``/``received``); equal is not."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    if len(a) == len(b):
        if a[start + 1 :] == b[start + 1 :]:
            return True  # one replaced
        swapped = a[start] == b[start + 1] and a[start + 1] == b[start]
        return swapped and a[start + 2 :] == b[start + 2 :]
    shorter, longer = (a, b) if len(a) < len(b) else (b, a)
    return shorter[start:] == longer[start + 1 :]
