""" "Did you mean ...?": the closest known spelling of a mistyped name."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Iterable
from typing import Final

HINT_NAME_LENGTH: Final = 128
"""Names longer than this get no "did you mean" (nor are they offered as one) where the
names come from a chart or an event."""

LIKENESS_CANDIDATES: Final = 100
"""The most names :func:`bounded_did_you_mean` compares with a name by likeness
(``closest``, whose cost grows with the names' lengths multiplied); past it, only names
one edit away are offered."""

LIKENESS_PAIRS: Final = 65_536
"""The most character pairs (the name's length times the candidates' lengths, summed)
:func:`bounded_did_you_mean` compares by likeness; past it, only names one edit away are
offered. Alike names cost ``difflib`` about their pairs: 99 state ids of 128 characters,
alike but for their ends, made each wrong target's hint 0.2 s."""


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name most like ``name``, if any is close enough to be a likely typo."""
    matches = difflib.get_close_matches(name, sorted(set(known)), n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest known name, or ``""`` when none is close."""
    match = closest(name, known)
    return f"; did you mean {match!r}?" if match is not None else ""


class LikenessBudget:
    """The character pairs a series of hints (one compilation's) may still compare by
    likeness, shared: each :func:`bounded_did_you_mean` given it takes its pairs from it,
    and past it offers only names one edit away."""

    __slots__ = ("left",)

    def __init__(self, pairs: int) -> None:
        self.left = pairs


def bounded_did_you_mean(
    name: str,
    known: Collection[str],
    spellings: Callable[[], NearSpellings] | None = None,
    budget: LikenessBudget | None = None,
) -> str:
    """``did_you_mean(name, known)`` in time that does not grow with ``known`` or with the
    names' lengths, for names a chart and an event control: by likeness among up to
    ``LIKENESS_CANDIDATES`` names and ``LIKENESS_PAIRS`` character pairs, else among those
    one edit from ``name`` and up to ``INDEXED_LENGTH`` characters long (looked up in what
    ``spellings`` gives, asked only then: an index of at least every name of ``known``;
    without it, none); none for a name over ``HINT_NAME_LENGTH``. With ``budget``, the
    pairs compared by likeness come out of it, and what it has no more room for is not."""
    if len(name) > HINT_NAME_LENGTH:
        return ""
    if len(known) <= LIKENESS_CANDIDATES:
        candidates = [k for k in known if len(k) <= HINT_NAME_LENGTH]
        pairs = len(name) * sum(map(len, candidates))
        if pairs <= LIKENESS_PAIRS and (budget is None or pairs <= budget.left):
            if budget is not None:
                budget.left -= pairs
            return did_you_mean(name, candidates)
    if spellings is None:
        return ""
    members = known if isinstance(known, (set, frozenset, dict)) else frozenset(known)
    near = spellings().of(name, unindexed=False)
    return did_you_mean(name, [k for k in near if k in members])


def one_edit_apart(a: str, b: str) -> bool:
    """Whether ``b`` is ``a`` with one character inserted, deleted, replaced, or two
    neighbours swapped (``timout``/``timeout``, ``recieved``/``received``); equal is not."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    start = _common_prefix(a, b)
    if len(a) == len(b):
        if a[start + 1 :] == b[start + 1 :]:
            return True  # one replaced
        swapped = a[start] == b[start + 1] and a[start + 1] == b[start]
        return swapped and a[start + 2 :] == b[start + 2 :]
    shorter, longer = (a, b) if len(a) < len(b) else (b, a)
    return shorter[start:] == longer[start + 1 :]


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of ``a`` and ``b``, by halving: slices
    compared in C, where a loop over characters made long names slow."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


INDEXED_LENGTH: Final = 64
"""Names up to this long are found by :class:`NearSpellings`' index; longer ones (few in
any chart) are compared one by one, up to ``LONG_COMPARISONS``."""

LONG_COMPARISONS: Final = 20_000
"""The most comparisons one :class:`NearSpellings` makes of names over
``INDEXED_LENGTH`` with the names it holds of that length: past them, ``of`` reads only
its index (a chart of thousands of long names would pay thousands of times thousands)."""


class NearSpellings:
    """Among many names, those one edit from a given one (:func:`one_edit_apart`), found
    through an index instead of a comparison with every name.

    Two names one edit apart share a spelling with at most one character left out (the
    replaced, inserted or swapped one, or the shorter name itself): each name is indexed
    under itself and every such spelling, and what a lookup finds is checked with
    ``one_edit_apart``."""

    __slots__ = ("_by_spelling", "_long", "_long_left")

    def __init__(self, names: Iterable[str]) -> None:
        by_spelling: dict[str, set[str]] = {}
        long: set[str] = set()
        for name in names:
            if len(name) > INDEXED_LENGTH:
                long.add(name)
                continue
            for spelling in _one_left_out(name):
                by_spelling.setdefault(spelling, set()).add(name)
        self._by_spelling = by_spelling
        self._long = long
        self._long_left = LONG_COMPARISONS

    def of(self, name: str, *, unindexed: bool = True) -> list[str]:
        """The names one edit from ``name``, sorted; without ``unindexed``, or once
        ``LONG_COMPARISONS`` are spent, only those up to ``INDEXED_LENGTH`` characters
        (the longer ones are compared one by one)."""
        found: set[str] = set()
        if len(name) <= INDEXED_LENGTH + 1:
            by_spelling = self._by_spelling
            for spelling in _one_left_out(name):
                found.update(by_spelling.get(spelling, ()))
        long = self._long
        if unindexed and long and len(name) >= INDEXED_LENGTH:
            if len(long) <= self._long_left:
                self._long_left -= len(long)
                found.update(long)
            else:
                self._long_left = 0
        return sorted(other for other in found if one_edit_apart(name, other))


def _one_left_out(name: str) -> set[str]:
    """``name`` and each spelling of it with one character left out."""
    return {name, *(name[:i] + name[i + 1 :] for i in range(len(name)))}
