"""How many entries a machine's memo may keep: its count limit, or fewer when its entries
are large (ADR 37).

A memo keyed by configurations (candidates, plans, entry sets, replayed steps, shared
sets, judged positions, shape lines) holds what each entry names in full: with a
``<parallel>`` of 2,000 regions, 2,000 distinct configurations kept 778 MB. A count limit
alone bounds the entries, not what they hold.
"""

from __future__ import annotations

from typing import Final

MEMO_MEMBERS: Final = 1 << 17
"""About the most members (states, transitions, characters) a memo's entries hold in all,
once they are large: 64 entries of a 2,000-state configuration, a memo's whole count
limit below 64 states."""


def room(limit: int, size: int) -> int:
    """The entries a memo whose count limit is ``limit`` may hold before it takes an entry
    of ``size`` members: ``limit``, or fewer so that entries of that size hold at most
    ``MEMO_MEMBERS`` members in all (one at least)."""
    if size * limit <= MEMO_MEMBERS:
        return limit
    return max(1, MEMO_MEMBERS // size)
