"""A literal, slow reading of the W3C SCXML algorithm (Appendix D), for charts of ``Tree``.

The engine's core computes the same sets with indexes, plans and memos (ADR 20 and its
amendment of 2026-12-03); this module computes them as the recommendation's pseudo-code
does, set by set, with no shortcut, so a test can hold the two to the same logs and
configurations. It
knows only what the charts of ``engine_support.trees`` hold: ``In()`` conditions, ``<log>``
labels, ``<raise>`` and the counter ``n`` that bounds raises and eventless transitions.

Each procedure keeps the recommendation's name, in snake case, and its order of work. One
reading is the engine's and not literal: a microstep's transition domains are worked out
once, before its exit (``Reference.microstep`` says why).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from engine_support.trees import MAX_COUNT, Action, Node, Transition, Tree

MAX_MICROSTEPS = 400
"""Microsteps one macrostep may take before the reference gives up (``Endless``)."""


class Endless(Exception):
    """A macrostep did not end within ``MAX_MICROSTEPS``: the chart loops."""


def name_match(descriptors: tuple[str, ...], name: str) -> bool:
    """Section 3.12.1: a descriptor matches the name it is, and every name it is a prefix of
    up to a dot; ``*`` matches every name; a ``.*`` or ``.`` ending is ignored."""
    for descriptor in descriptors:
        if descriptor == "*":
            return True
        if descriptor.endswith(".*"):
            descriptor = descriptor[:-2]
        elif descriptor.endswith("."):
            descriptor = descriptor[:-1]
        if name == descriptor or name.startswith(descriptor + "."):
            return True
    return False


class Reference:
    """One execution of ``tree`` under the literal algorithm; ``logs`` collects the labels
    of every ``<log>`` run, in order, and is emptied by whoever reads it."""

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self.order = {node.id: index for index, node in enumerate(tree.document_order())}
        self.configuration: set[Node] = set()
        self.history_value: dict[str, list[Node]] = {}
        self.internal_queue: deque[str] = deque()
        self.logs: list[str] = []
        self.running = True
        self.n = 0

    # -- the interpreter's entry points ------------------------------------------------

    def start(self) -> None:
        """``interpret``: enter the document's initial states and run to stability."""
        initial = self.tree.root_initial()
        self.enter_states([initial], [self.transition_domain(initial)])
        self.macrostep()
        if not self.running:
            self.exit_interpreter()

    def send(self, name: str) -> None:
        """One external event, as ``mainEventLoop`` takes it after the internal queue."""
        enabled = self.select_transitions(name)
        if enabled:
            self.microstep(enabled)
        self.macrostep()
        if not self.running:
            self.exit_interpreter()

    def active(self) -> frozenset[str]:
        """The ids of the states in the configuration."""
        return frozenset(node.id for node in self.configuration)

    def macrostep(self) -> None:
        """``mainEventLoop``'s inner loop: eventless transitions, then internal events."""
        microsteps = 0
        while self.running:
            enabled = self.select_eventless_transitions()
            if not enabled:
                if not self.internal_queue:
                    return
                enabled = self.select_transitions(self.internal_queue.popleft())
            if enabled:
                microsteps += 1
                if microsteps > MAX_MICROSTEPS:
                    raise Endless
                self.microstep(enabled)

    def exit_interpreter(self) -> None:
        """Every state left in the configuration exits, in exit order."""
        for state in self.exit_order(self.configuration):
            self.execute_blocks(state.onexit)
            self.configuration.discard(state)

    # -- selection ---------------------------------------------------------------------

    def select_eventless_transitions(self) -> list[Transition]:
        """The first eventless transition enabled per atomic state, conflicts removed."""
        return self.select(lambda transition: not transition.events)

    def select_transitions(self, name: str) -> list[Transition]:
        """The first transition matching ``name`` per atomic state, conflicts removed."""
        return self.select(
            lambda transition: bool(transition.events) and name_match(transition.events, name)
        )

    def select(self, wanted: Callable[[Transition], bool]) -> list[Transition]:
        enabled: list[Transition] = []
        atomic = [state for state in self.configuration if state.is_atomic()]
        for state in self.document_sorted(atomic):
            found = None
            for source in [state, *self.proper_ancestors(state, None)]:
                for transition in source.transitions:
                    if wanted(transition) and self.condition_match(transition):
                        found = transition
                        break
                if found is not None:
                    break
            if found is not None and found not in enabled:
                enabled.append(found)
        return self.remove_conflicting_transitions(enabled)

    def condition_match(self, transition: Transition) -> bool:
        if transition.counted and self.n >= MAX_COUNT:
            return False
        return transition.cond is None or any(
            node.id == transition.cond for node in self.configuration
        )

    def remove_conflicting_transitions(self, enabled: list[Transition]) -> list[Transition]:
        filtered: list[Transition] = []
        for t1 in enabled:
            preempted = False
            to_remove: list[Transition] = []
            for t2 in filtered:
                if self.compute_exit_set([t1]) & self.compute_exit_set([t2]):
                    if self.is_descendant(t1.source, t2.source):
                        to_remove.append(t2)
                    else:
                        preempted = True
                        break
            if not preempted:
                for t3 in to_remove:
                    filtered.remove(t3)
                filtered.append(t1)
        return filtered

    # -- a microstep ---------------------------------------------------------------------

    def microstep(self, enabled: list[Transition]) -> None:
        # The one reading that is not literal, the engine's: each transition's domain is
        # worked out once, before the exit. A domain depends on the history a target
        # history state holds, which ``exitStates`` may record; worked out again for the
        # entry, a deep history of a parallel state targeted from inside it would leave
        # that parallel state out of the configuration.
        domains = [self.transition_domain(transition) for transition in enabled]
        self.exit_states(enabled)
        for transition in enabled:
            if transition.counted:
                self.n += 1
            self.execute(transition.content)
        self.enter_states(enabled, domains)

    def exit_states(self, enabled: list[Transition]) -> None:
        to_exit = self.exit_order(self.compute_exit_set(enabled))
        for state in to_exit:
            for history in state.histories():
                if history.history_type == "deep":
                    recorded = [
                        s
                        for s in self.configuration
                        if s.is_atomic() and self.is_descendant(s, state)
                    ]
                else:
                    recorded = [s for s in self.configuration if s.parent is state]
                self.history_value[history.id] = self.document_sorted(recorded)
        for state in to_exit:
            self.execute_blocks(state.onexit)
            self.configuration.discard(state)

    def compute_exit_set(self, transitions: Iterable[Transition]) -> set[Node]:
        to_exit: set[Node] = set()
        for transition in transitions:
            if transition.targets:
                domain = self.transition_domain(transition)
                for state in self.configuration:
                    if self.is_descendant(state, domain):
                        to_exit.add(state)
        return to_exit

    def enter_states(self, enabled: list[Transition], domains: list[Node | None]) -> None:
        entry = _Entry()
        self.compute_entry_set(enabled, entry, domains)
        for state in self.document_sorted(entry.states):
            self.configuration.add(state)
            self.execute_blocks(state.onentry)
            if state in entry.default_entry and state.initial_transition is not None:
                self.execute(state.initial_transition.content)
            if state.id in entry.history_content:
                self.execute(entry.history_content[state.id])
            if state.kind == "final":
                parent = state.parent
                assert parent is not None
                if parent.parent is None:
                    self.running = False
                else:
                    self.internal_queue.append(f"done.state.{parent.id}")
                    grandparent = parent.parent
                    if grandparent.kind == "parallel" and all(
                        self.is_in_final_state(child) for child in grandparent.child_states()
                    ):
                        self.internal_queue.append(f"done.state.{grandparent.id}")

    def compute_entry_set(
        self, transitions: list[Transition], entry: _Entry, domains: list[Node | None]
    ) -> None:
        for index, transition in enumerate(transitions):
            for target in transition.targets:
                self.add_descendants(self.tree.node(target), entry)
            for state in self.effective_targets(transition):
                self.add_ancestors(state, domains[index], entry)

    def add_descendants(self, state: Node, entry: _Entry) -> None:
        if state.kind == "history":
            self.add_history(state, entry)
            return
        _add(entry.states, state)
        if state.is_compound():
            _add(entry.default_entry, state)
            initial = [self.tree.node(target) for target in state.initial_targets()]
            for target in initial:
                self.add_descendants(target, entry)
            for target in initial:
                self.add_ancestors(target, state, entry)
        elif state.kind == "parallel":
            for child in state.child_states():
                if not any(self.is_descendant(s, child) for s in entry.states):
                    self.add_descendants(child, entry)

    def add_history(self, history: Node, entry: _Entry) -> None:
        """``addDescendantStatesToEnter`` of a history state."""
        parent = history.parent
        assert parent is not None
        if history.id in self.history_value:
            recorded = self.history_value[history.id]
        else:
            default = history.history_default
            assert default is not None
            entry.history_content[parent.id] = default.content
            recorded = [self.tree.node(target) for target in default.targets]
        for state in recorded:
            self.add_descendants(state, entry)
        for state in recorded:
            self.add_ancestors(state, parent, entry)

    def add_ancestors(self, state: Node, ancestor: Node | None, entry: _Entry) -> None:
        for anc in self.proper_ancestors(state, ancestor):
            if anc.parent is None:
                continue  # the <scxml> element is never entered
            _add(entry.states, anc)
            if anc.kind == "parallel":
                for child in anc.child_states():
                    if not any(self.is_descendant(s, child) for s in entry.states):
                        self.add_descendants(child, entry)

    def is_in_final_state(self, state: Node) -> bool:
        if state.is_compound():
            return any(
                child.kind == "final" and child in self.configuration
                for child in state.child_states()
            )
        if state.kind == "parallel":
            return all(self.is_in_final_state(child) for child in state.child_states())
        return False

    def transition_domain(self, transition: Transition) -> Node | None:
        targets = self.effective_targets(transition)
        source = transition.source
        if not targets:
            return None
        if source.parent is None:
            return source  # the document's initial transition
        if (
            transition.internal
            and source.is_compound()
            and all(self.is_descendant(s, source) for s in targets)
        ):
            return source
        return self.find_lcca([source, *targets])

    def find_lcca(self, states: list[Node]) -> Node:
        for anc in self.proper_ancestors(states[0], None):
            if (anc.parent is None or anc.is_compound()) and all(
                self.is_descendant(s, anc) for s in states[1:]
            ):
                return anc
        raise AssertionError("the root is every state's ancestor")

    def effective_targets(self, transition: Transition) -> list[Node]:
        targets: list[Node] = []
        for target in transition.targets:
            node = self.tree.node(target)
            if node.kind == "history":
                if node.id in self.history_value:
                    found = self.history_value[node.id]
                else:
                    assert node.history_default is not None
                    found = self.effective_targets(node.history_default)
                for s in found:
                    _add(targets, s)
            else:
                _add(targets, node)
        return targets

    # -- content -----------------------------------------------------------------------

    def execute_blocks(self, blocks: list[list[Action]]) -> None:
        for block in blocks:
            self.execute(block)

    def execute(self, actions: list[Action]) -> None:
        for kind, value in actions:
            if kind == "log":
                self.logs.append(value)
            elif self.n < MAX_COUNT:
                self.n += 1
                self.internal_queue.append(value)

    # -- the tree ------------------------------------------------------------------------

    def proper_ancestors(self, state: Node, upto: Node | None) -> list[Node]:
        """The ancestors of ``state``, nearest first, up to ``upto`` (excluded), or to the
        root (included) when ``upto`` is None."""
        found: list[Node] = []
        node = state.parent
        while node is not None and node is not upto:
            found.append(node)
            node = node.parent
        return found

    @staticmethod
    def is_descendant(state: Node, ancestor: Node | None) -> bool:
        node = state.parent
        while node is not None:
            if node is ancestor:
                return True
            node = node.parent
        return False

    def document_sorted(self, states: Iterable[Node]) -> list[Node]:
        return sorted(states, key=lambda node: self.order[node.id])

    def exit_order(self, states: Iterable[Node]) -> list[Node]:
        return sorted(states, key=lambda node: self.order[node.id], reverse=True)


@dataclass
class _Entry:
    """``enterStates``' three sets: ``statesToEnter``, ``statesForDefaultEntry`` and
    ``defaultHistoryContent``."""

    states: list[Node] = field(default_factory=list)
    default_entry: list[Node] = field(default_factory=list)
    history_content: dict[str, list[Action]] = field(default_factory=dict)


def _add(ordered: list[Node], node: Node) -> None:
    """``OrderedSet.add``."""
    if node not in ordered:
        ordered.append(node)
