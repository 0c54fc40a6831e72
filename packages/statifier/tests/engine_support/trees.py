"""Random charts held as trees, for the literal Appendix D reference (``appendix_d``).

A ``Tree`` is what the reference reads; ``Tree.scxml()`` is the same chart written out for
the engine. Conditions are ``In()``, content is ``<log label>`` and ``<raise>``. Every state
logs its entry (``+id``) and exit (``-id``), every transition, ``<initial>`` and history
default its content (``t:``, ``i:``, ``h:``), so the order of everything a microstep does
shows in the logs.

One variable, ``n``, keeps charts from looping for ever: a ``<raise>`` happens only while
``n < MAX_COUNT`` and adds one to it, and so does a transition that is eventless or can
take a done event (its condition says ``n < MAX_COUNT``, its content starts with the
increment). The charts use the Python or the ECMAScript datamodel for it (their
expressions are spelled alike but for ``and``); nothing else reads ``n``.

``trees()`` draws compound, parallel, atomic and final states, shallow and deep history
with default transitions, ``initial`` attributes and ``<initial>`` elements, external and
internal transitions with no target, one target (a history included) or two targets in
different regions of one parallel, eventless transitions, done events and descriptors
with prefixes and ``*``. Every chart drawn is valid, and every one ends each macrostep (the
reference checks it: ``appendix_d.Endless``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from hypothesis import strategies as st

Action = tuple[Literal["log", "raise"], str]
"""One piece of executable content: ``("log", label)`` or ``("raise", event name)``."""

EXTERNAL_EVENTS = ("a", "a.b", "c", "d")
"""The names of the external events a test sends."""

_DESCRIPTORS = ("a", "a", "a.b", "a.*", "c", "c", "d", "a c", "*", "done", "e")
"""``event`` attributes drawn besides done events (``e`` is only ever raised)."""

_RAISED = ("e", "e", "e.x", "a", "c")
"""What ``<raise>`` raises: mostly names no external event has."""

MAX_COUNT = 6
"""The bound of ``n``: raises and eventless transitions in one run of a chart."""

MAX_STATES = 14
MAX_DEPTH = 4

Kind = Literal["root", "state", "parallel", "final", "history"]


@dataclass(eq=False)
class Transition:
    """A ``<transition>`` (also an ``<initial>``'s or a history's default)."""

    source: Node
    events: tuple[str, ...] = ()
    cond: str | None = None
    """A state's id: the condition is ``In()`` of it."""
    counted: bool = False
    """The condition also says ``n < MAX_COUNT``, the content adds one to ``n`` (eventless
    transitions and those that can take a done event)."""
    targets: tuple[str, ...] = ()
    internal: bool = False
    content: list[Action] = field(default_factory=list)


@dataclass(eq=False)
class Node:
    """A state, a history pseudo-state or the ``<scxml>`` root."""

    id: str
    kind: Kind
    parent: Node | None
    children: list[Node] = field(default_factory=list)
    onentry: list[list[Action]] = field(default_factory=list)
    onexit: list[list[Action]] = field(default_factory=list)
    transitions: list[Transition] = field(default_factory=list)
    initial: tuple[str, ...] = ()
    """The ``initial`` attribute's targets (none: the ``<initial>`` or the first child)."""
    initial_transition: Transition | None = None
    """An ``<initial>`` element's transition."""
    history_type: Literal["shallow", "deep"] = "shallow"
    history_default: Transition | None = None

    def child_states(self) -> list[Node]:
        """``getChildStates``: the ``<state>``, ``<parallel>`` and ``<final>`` children."""
        return [child for child in self.children if child.kind != "history"]

    def histories(self) -> list[Node]:
        """The ``<history>`` children."""
        return [child for child in self.children if child.kind == "history"]

    def is_atomic(self) -> bool:
        """A state (not the root, not a history) with no child states."""
        return self.kind in ("state", "final") and not self.child_states()

    def is_compound(self) -> bool:
        """A ``<state>`` with child states."""
        return self.kind == "state" and bool(self.child_states())

    def initial_targets(self) -> tuple[str, ...]:
        """What a default entry enters: ``initial``, the ``<initial>``'s targets, or the
        first child state."""
        if self.initial:
            return self.initial
        if self.initial_transition is not None:
            return self.initial_transition.targets
        return (self.child_states()[0].id,)

    def descendants(self) -> Iterator[Node]:
        """Every node under this one, in document order."""
        for child in self.children:
            yield child
            yield from child.descendants()


@dataclass(eq=False)
class Tree:
    """A whole chart: its root and every node by id."""

    root: Node

    def __post_init__(self) -> None:
        self.by_id = {node.id: node for node in self.document_order()}

    def node(self, node_id: str) -> Node:
        """The node of ``node_id``."""
        return self.by_id[node_id]

    def document_order(self) -> list[Node]:
        """The root, then every node in document order."""
        return [self.root, *self.root.descendants()]

    def root_initial(self) -> Transition:
        """The document's initial transition."""
        return Transition(source=self.root, targets=self.root.initial_targets())

    def scxml(
        self, datamodel: Literal["python", "ecmascript"] = "python", logs: bool = True
    ) -> str:
        """The chart as SCXML text, its conditions written for ``datamodel``; without
        ``logs``, with no ``<log>`` (a macrostep with no other content then has no effect,
        and the engine replays it the next time: ADR 20)."""
        writer = _Writer(" and " if datamodel == "python" else " &amp;&amp; ", logs)
        initial = f' initial="{" ".join(self.root.initial)}"' if self.root.initial else ""
        body = "".join(writer.element(child) for child in self.root.children)
        return (
            f'<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="{datamodel}"'
            f'{initial}><datamodel><data id="n" expr="0"/></datamodel>{body}</scxml>'
        )


_COUNT = '<assign location="n" expr="n + 1"/>'


@dataclass(frozen=True)
class _Writer:
    """Writes nodes as SCXML: ``both`` joins two conditions, ``logs`` keeps ``<log>``."""

    both: str
    logs: bool

    def actions(self, actions: list[Action]) -> str:
        return "".join(
            (f'<log label="{value}"/>' if self.logs else "")
            if kind == "log"
            else f'<if cond="n &lt; {MAX_COUNT}">{_COUNT}<raise event="{value}"/></if>'
            for kind, value in actions
        )

    def transition(self, transition: Transition) -> str:
        attrs = ""
        if transition.events:
            attrs += f' event="{" ".join(transition.events)}"'
        conditions = [f"n &lt; {MAX_COUNT}"] if transition.counted else []
        if transition.cond is not None:
            conditions.append(f"In('{transition.cond}')")
        if conditions:
            attrs += f' cond="{self.both.join(conditions)}"'
        if transition.targets:
            attrs += f' target="{" ".join(transition.targets)}"'
        if transition.internal:
            attrs += ' type="internal"'
        count = _COUNT if transition.counted else ""
        return f"<transition{attrs}>{count}{self.actions(transition.content)}</transition>"

    def element(self, node: Node) -> str:
        if node.kind == "history":
            assert node.history_default is not None
            return (
                f'<history id="{node.id}" type="{node.history_type}">'
                f"{self.transition(node.history_default)}</history>"
            )
        parts = [f"<onentry>{self.actions(block)}</onentry>" for block in node.onentry]
        parts += [f"<onexit>{self.actions(block)}</onexit>" for block in node.onexit]
        parts += [self.transition(transition) for transition in node.transitions]
        if node.initial_transition is not None:
            parts.append(f"<initial>{self.transition(node.initial_transition)}</initial>")
        parts += [self.element(child) for child in node.children]
        initial = f' initial="{" ".join(node.initial)}"' if node.initial else ""
        return f'<{node.kind} id="{node.id}"{initial}>{"".join(parts)}</{node.kind}>'


def _states_under(node: Node) -> list[Node]:
    """Every state under ``node`` (no history), in document order."""
    return [n for n in node.descendants() if n.kind != "history"]


def _ancestors(node: Node) -> Iterator[Node]:
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


class _Builder:
    """Draws one tree: the states first, then everything that names them."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw
        self.remaining = draw(st.integers(3, MAX_STATES))
        self.count = 0

    def new_id(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def states(self, parent: Node, depth: int) -> None:
        draw = self.draw
        wanted = draw(st.integers(1, 3))
        while len(parent.children) < wanted and (self.remaining > 0 or not parent.children):
            self.remaining -= 1
            kinds: list[Kind] = ["state", "state"]
            if parent.kind == "state":
                kinds += ["final", "final"]
            elif parent.kind == "root" and parent.children:
                kinds.append("final")  # (a chart that starts in a final ends at once)
            if depth < MAX_DEPTH and self.remaining > 0:
                kinds += ["state", "state", "parallel"]
            kind = draw(st.sampled_from(kinds))
            # A region is mostly compound: its finals are what a parallel's done event needs.
            compound = kind == "parallel" or (
                kind == "state"
                and depth < MAX_DEPTH
                and self.remaining > 0
                and (parent.kind == "parallel" or draw(st.booleans()))
            )
            prefix = {"state": "s", "parallel": "p", "final": "f"}[kind]
            node = Node(self.new_id(prefix), kind, parent)
            parent.children.append(node)
            if compound:
                self.states(node, depth + 1)
                if draw(st.integers(0, 2)) == 0:
                    history = Node(self.new_id("h"), "history", node)
                    history.history_type = draw(st.sampled_from(("shallow", "deep")))
                    node.children.insert(draw(st.integers(0, len(node.children))), history)

    def content(self, label: str) -> list[Action]:
        actions: list[Action] = [("log", label)]
        if self.draw(st.integers(0, 4)) == 0:
            actions.append(("raise", self.draw(st.sampled_from(_RAISED))))
        return actions

    def targets(self, tree: Tree) -> tuple[str, ...]:
        draw = self.draw
        everything = [node for node in tree.document_order() if node.kind != "root"]
        parallels = [
            node for node in everything if node.kind == "parallel" and len(node.child_states()) > 1
        ]
        if parallels and draw(st.integers(0, 5)) == 0:
            parallel = draw(st.sampled_from(parallels))
            regions = draw(
                st.lists(
                    st.sampled_from(parallel.child_states()), min_size=2, max_size=2, unique=True
                )
            )
            return tuple(self.under(region).id for region in regions)
        histories = [node for node in everything if node.kind == "history"]
        finals = [node for node in everything if node.kind == "final"]
        choice = draw(st.integers(0, 5))
        if choice == 0 and histories:
            return (draw(st.sampled_from(histories)).id,)
        if choice == 1 and finals:
            return (draw(st.sampled_from(finals)).id,)
        return (draw(st.sampled_from(everything)).id,)

    def under(self, region: Node) -> Node:
        """The region itself or a state (not a history) under it."""
        return self.draw(st.sampled_from([region, *_states_under(region)]))

    def transition(self, tree: Tree, source: Node, index: int) -> Transition:
        draw = self.draw
        states = [node.id for node in tree.document_order() if node.kind not in ("root", "history")]
        compounds = [
            node.id
            for node in tree.document_order()
            if node.kind == "parallel" or node.is_compound()
        ]
        transition = Transition(source=source)
        if draw(st.integers(0, 5)) != 0:
            own = [
                node.id
                for node in (source, *_ancestors(source))
                if node.kind == "parallel" or node.is_compound()
            ]
            choice = draw(st.integers(0, 4))
            if choice == 0 and own:
                transition.events = (f"done.state.{draw(st.sampled_from(own))}",)
            elif choice == 1 and compounds:
                transition.events = (f"done.state.{draw(st.sampled_from(compounds))}",)
            else:
                transition.events = tuple(draw(st.sampled_from(_DESCRIPTORS)).split())
        transition.counted = not transition.events or any(
            descriptor == "*" or descriptor.startswith("done") for descriptor in transition.events
        )
        if draw(st.integers(0, 2)) == 0:
            transition.cond = draw(st.sampled_from(states))
        if draw(st.integers(0, 4)) != 0:
            transition.targets = self.targets(tree)
        transition.internal = draw(st.integers(0, 2)) == 0
        transition.content = self.content(f"t:{source.id}.{index}")
        return transition

    def fill(self, tree: Tree) -> None:
        draw = self.draw
        for node in tree.document_order():
            if node.kind == "history":
                parent = node.parent
                assert parent is not None
                default = draw(st.sampled_from(_states_under(parent)))
                node.history_default = Transition(
                    source=node, targets=(default.id,), content=self.content(f"h:{node.id}")
                )
                continue
            if node.kind != "root":
                node.onentry.append(self.content(f"+{node.id}"))
                node.onexit.append(self.content(f"-{node.id}"))
            if node.kind == "root" or node.is_compound():
                choice = draw(st.integers(0, 3))
                inner = _states_under(node)
                if choice == 0:
                    node.initial = (draw(st.sampled_from(inner)).id,)
                elif choice == 1 and node.kind != "root":
                    node.initial_transition = Transition(
                        source=node,
                        targets=(draw(st.sampled_from(inner)).id,),
                        content=self.content(f"i:{node.id}"),
                    )
            if node.kind in ("state", "parallel"):
                for index in range(draw(st.integers(0, 2))):
                    node.transitions.append(self.transition(tree, node, index))


@st.composite
def trees(draw: st.DrawFn) -> Tree:
    """A random valid chart (see the module's docstring)."""
    builder = _Builder(draw)
    root = Node("__root", "root", None)
    builder.states(root, 1)
    tree = Tree(root)
    builder.fill(tree)
    return tree
