"""Hypothesis strategies for small random SCXML charts.

A chart has at most ``MAX_STATES`` states (history pseudo-states not counted), nested at most
``MAX_DEPTH`` levels below the root: compound, parallel, atomic and final states, shallow and
deep history, transitions on the alphabet ``a b c d`` with random targets, ``<invoke>`` of
the registered type ``INVOKE_TYPE``, eventless transitions guarded by a counter they
increment (so they cannot loop forever), and executable content using ``<raise>``, delayed
``<send>``, ``<cancel>``, ``<send>`` to ``#_internal``, ``<assign>`` and ``<log>``. Every
target names a state that exists, so every generated chart compiles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import quoteattr

from hypothesis import strategies as st

EVENTS = ("a", "b", "c", "d")
"""The event alphabet transitions listen to and external events are drawn from."""

INVOKE_TYPE = "test"
"""The invoke type generated ``<invoke>`` elements use; register it with the driver."""

MAX_STATES = 12
MAX_DEPTH = 3

_DATAMODEL = (
    '<datamodel><data id="n" expr="0"/><data id="x" expr="0.1"/>'
    "<data id=\"v\" expr=\"{'s': 'h\u00e9llo \u2603', 'l': [1, 2.5, None, True],"
    " 'big': 7 * 10 ** 30}\"/></datamodel>"
)


@dataclass
class _Node:
    id: str
    kind: str  # "state" | "parallel" | "final"
    children: list[_Node] = field(default_factory=list)
    history: tuple[str, str] | None = None  # (id, "shallow" | "deep")
    body: list[str] = field(default_factory=list)  # transitions, onentry, onexit markup

    def descendants(self) -> list[_Node]:
        found: list[_Node] = []
        for child in self.children:
            found.append(child)
            found.extend(child.descendants())
        return found


def _action(draw: st.DrawFn) -> str:
    """One piece of executable content."""
    event = draw(st.sampled_from(EVENTS))
    choice = draw(st.integers(0, 8))
    if choice == 0:
        return f'<raise event="{event}"/>'
    if choice == 1:
        timer = draw(st.sampled_from(("t1", "t2")))
        return f'<send event="{event}" delay="1s" id="{timer}"/>'
    if choice == 2:
        return f'<send event="{event}" delay="2s"/>'
    if choice == 3:
        return f'<cancel sendid="{draw(st.sampled_from(("t1", "t2")))}"/>'
    if choice == 4:
        return f'<send event="{event}" target="#_internal"/>'
    if choice == 5:
        return '<log label="n" expr="[n, x]"/>'
    if choice == 6:
        return '<assign location="x" expr="x + 0.1"/>'
    if choice == 7:
        return '<assign location="v" expr="_event"/>'
    return '<if cond="n &lt; 3"><assign location="n" expr="n + 1"/><raise event="b"/></if>'


def _block(draw: st.DrawFn) -> str:
    return "".join(_action(draw) for _ in range(draw(st.integers(1, 2))))


def _transition(draw: st.DrawFn, targets: list[str], states: list[str]) -> str:
    target = draw(st.none() | st.sampled_from(targets))
    attrs = "" if target is None else f" target={quoteattr(target)}"
    if draw(st.booleans()):
        attrs += ' type="internal"'
    if draw(st.integers(0, 3)) == 0:
        # Eventless: the guard and the increment bound how often it can fire.
        content = '<assign location="n" expr="n + 1"/>' + (
            _block(draw) if draw(st.booleans()) else ""
        )
        return f'<transition cond="n &lt; 3"{attrs}>{content}</transition>'
    events = draw(st.sampled_from((*EVENTS, "a b", "done", "error", "*")))
    cond = draw(
        st.sampled_from((None, "n &lt; 2", "x &gt; 0.25", f"In('{draw(st.sampled_from(states))}')"))
    )
    if cond is not None:
        attrs += f' cond="{cond}"'
    content = _block(draw) if draw(st.booleans()) else ""
    return f'<transition event="{events}"{attrs}>{content}</transition>'


def _add_content(draw: st.DrawFn, node: _Node, targets: list[str], states: list[str]) -> None:
    """Transitions, onentry/onexit blocks and an invoke, at random, in ``node.body``."""
    if node.kind != "final":
        for _ in range(draw(st.integers(0, 2))):
            node.body.append(_transition(draw, targets, states))
    if draw(st.integers(0, 2)) == 0:
        node.body.append(f"<onentry>{_block(draw)}</onentry>")
    if draw(st.integers(0, 3)) == 0:
        node.body.append(f"<onexit>{_block(draw)}</onexit>")
    if node.kind != "final" and draw(st.integers(0, 4)) == 0:
        autoforward = draw(st.sampled_from(("true", "false")))
        node.body.append(f'<invoke type="{INVOKE_TYPE}" autoforward="{autoforward}"/>')


def _render(draw: st.DrawFn, node: _Node) -> str:
    """``node`` and its children as XML; a history's default target is drawn here."""
    parts = list(node.body)
    if node.history is not None:
        history_id, history_type = node.history
        default = draw(st.sampled_from(node.descendants())).id
        parts.append(
            f'<history id="{history_id}" type="{history_type}">'
            f'<transition target="{default}"/></history>'
        )
    parts.extend(_render(draw, child) for child in node.children)
    tag = "final" if node.kind == "final" else node.kind
    return f'<{tag} id="{node.id}">{"".join(parts)}</{tag}>'


@st.composite
def charts(draw: st.DrawFn) -> str:
    """A random, always-valid SCXML chart as XML text."""
    remaining = [draw(st.integers(1, MAX_STATES))]
    counter = [0]

    def new_id(prefix: str) -> str:
        counter[0] += 1
        return f"{prefix}{counter[0]}"

    def build(depth: int, parent_kind: str) -> _Node:
        remaining[0] -= 1
        kinds = ["state"]
        if parent_kind != "parallel":
            kinds.append("final")
        if depth < MAX_DEPTH and remaining[0] > 0:
            kinds += ["compound", "compound", "parallel"]
        kind = draw(st.sampled_from(kinds))
        if kind in ("state", "final"):
            return _Node(new_id("s"), kind)
        node = _Node(
            new_id("p" if kind == "parallel" else "s"),
            "parallel" if kind == "parallel" else "state",
        )
        wanted = draw(st.integers(1, 3))
        while len(node.children) < wanted and (remaining[0] > 0 or not node.children):
            node.children.append(build(depth + 1, node.kind))
        if draw(st.integers(0, 2)) == 0:
            node.history = (new_id("h"), draw(st.sampled_from(("shallow", "deep"))))
        return node

    roots: list[_Node] = []
    wanted = draw(st.integers(1, 3))
    while len(roots) < wanted and (remaining[0] > 0 or not roots):
        roots.append(build(1, "scxml"))

    everything: list[_Node] = []
    for root in roots:
        everything.append(root)
        everything.extend(root.descendants())
    states = [node.id for node in everything]
    targets = states + [node.history[0] for node in everything if node.history is not None]

    for node in everything:
        _add_content(draw, node, targets, states)

    body = "".join(_render(draw, root) for root in roots)
    return (
        f'<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0">{_DATAMODEL}{body}</scxml>'
    )


def event_data() -> st.SearchStrategy[Any]:
    """Payloads for external events: JSON-like values, floats and unicode included."""
    return st.integers(-3, 3) | st.sampled_from(_PAYLOADS)


_PAYLOADS: tuple[Any, ...] = (
    None,
    0.1,
    -0.0,
    1e300,
    2**70,
    "h\u00e9llo \u2603 \U0001f600",
    [1, 2.5, None, True, "x"],
    {"k": {"n": [False, 0.30000000000000004]}, "\u00e9": []},
)
