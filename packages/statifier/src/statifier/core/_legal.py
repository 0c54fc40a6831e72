"""Whether the parts of a position describe something the interpreter can reach.

A position read from storage is checked for meaning, not only for shape: a configuration
the algorithm could never produce (two active children of a compound state, a history
that recorded its own ancestor) would load and then fail deep inside the next event. Each
check returns what is wrong, or None. All of them are linear in the size of what they
check.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from itertools import pairwise

from statifier.chart.model import StateNode


def configuration_problem(
    states: tuple[StateNode, ...], configuration: Collection[int]
) -> str | None:
    """Why ``configuration`` (the root implicit) is not a legal configuration, or None.

    Legal (SCXML 3.11): the root's single active child is there; every active state's
    parent is active; an active compound state has exactly one active child; an active
    parallel state has all its children active; no history state is active.
    """
    if not configuration:
        return "a running execution has no active state"
    return subtree_problem(states, 0, configuration)


def subtree_problem(states: tuple[StateNode, ...], top: int, active: Collection[int]) -> str | None:
    """Why ``active`` is not a legal configuration of ``top``'s subtree (``top`` implicit)."""
    members = set(active)
    if top in members:
        return f"state {states[top].id!r} is listed inside its own subtree"
    for s in members:
        state = states[s]
        if state.kind == "history":
            return f"history state {state.id!r} is active"
        if not top < s <= states[top].last:
            return f"state {state.id!r} is outside {states[top].id!r}"
        if state.parent != top and state.parent not in members:
            return f"state {state.id!r} is active but its parent is not"
    for s in (top, *members):
        state = states[s]
        if state.kind == "parallel":
            missing = [c for c in state.children if c not in members]
            if missing:
                return f"parallel state {state.id!r} is active without {states[missing[0]].id!r}"
        elif state.children:
            count = sum(1 for c in state.children if c in members)
            if count != 1:
                return f"compound state {state.id!r} has {count} active children, not one"
    return None


def history_problem(
    states: tuple[StateNode, ...], history: int, recorded: Iterable[int]
) -> str | None:
    """Why ``recorded`` is not something history state ``history`` could have recorded.

    A shallow history records the active children of its parent, a deep one the active
    atomic descendants; either way, entering what it recorded must give a legal
    configuration of the parent's subtree.
    """
    node = states[history]
    parent = node.parent
    chosen = list(recorded)
    if not chosen:
        return None
    if any(a >= b for a, b in pairwise(chosen)):
        return f"the record of history {node.id!r} is not strictly ascending"
    for s in chosen:
        if not parent < s <= states[parent].last or states[s].kind == "history":
            return f"history {node.id!r} recorded {states[s].id!r}, not a state of its parent"
        if node.history_deep:
            if not states[s].atomic:
                return f"deep history {node.id!r} recorded {states[s].id!r}, not an atomic state"
        elif states[s].parent != parent:
            return f"shallow history {node.id!r} recorded {states[s].id!r}, not a child"
    if node.history_deep:
        closed = set(chosen)
        for s in chosen:
            for anc in states[s].ancestors:
                if anc == parent:
                    break
                closed.add(anc)
        problem = _complete_problem(states, parent, closed)
    else:
        problem = _complete_problem(states, parent, set(chosen), shallow=True)
    return None if problem is None else f"history {node.id!r}: {problem}"


def _complete_problem(
    states: tuple[StateNode, ...], top: int, members: set[int], *, shallow: bool = False
) -> str | None:
    """Like ``subtree_problem``, but a shallow record lists only the top level."""
    if not shallow:
        return subtree_problem(states, top, members)
    state = states[top]
    if state.kind == "parallel":
        if len(members) != len(state.children):
            return "a parallel parent records all its children"
    elif len(members) != 1:
        return "a compound parent records exactly one child"
    return None
