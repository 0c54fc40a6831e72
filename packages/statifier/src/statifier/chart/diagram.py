"""Diagrams of a compiled chart: Mermaid ``stateDiagram-v2`` text and Graphviz DOT.

Compound states are drawn as boxes holding their children, parallel states as boxes whose
regions are separated (Mermaid ``--``) or dashed (DOT), history states as ``H``/``H*``,
final states as Mermaid end markers or DOT double circles. A transition is labelled with
its events, its condition in brackets and ``/`` when it runs executable content. States in
``active`` (a configuration, by index) are highlighted.

Neither format needs anything installed to produce; SVG (``to_svg``) is DOT run through
Graphviz's ``dot``, found on the path, which ``statifier diagram --format svg`` and the web
console use. Every label reaches Graphviz as a quoted DOT string, which it writes into the
SVG as escaped text: a state id or a condition cannot become markup.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable, Iterator
from typing import Final

from statifier.chart.model import Machine, StateNode, TransitionNode
from statifier.errors import StatifierError

ACTIVE_FILL = "#fde68a"
ACTIVE_STROKE = "#b45309"
ACTIVE_REGION_FILL = "#fef3c7"
"""Active compound and parallel states are filled lighter than the active leaves."""
MAX_LABEL = 60
"""Longest list of events, and longest condition, shown in a label (longer ones are cut
with an ellipsis): a label is drawn on every edge of its transition."""
DOT_TIMEOUT_S: Final = 60
"""How long ``to_svg`` lets Graphviz run, by default."""
GRAPHVIZ_HINT: Final = (
    "SVG needs Graphviz's 'dot' on the PATH: install Graphviz (Debian/Ubuntu: "
    "apt-get install graphviz; macOS: brew install graphviz; Windows: winget install "
    "graphviz, or https://graphviz.org/download/), or use --format mermaid or --format dot"
)


class DiagramError(StatifierError):
    """``to_svg`` could not draw: Graphviz is missing, failed or ran out of time."""


class GraphvizMissing(DiagramError):
    """Graphviz's ``dot`` is not on the path (the message says how to get it)."""


def transition_label(transition: TransitionNode) -> str:
    """``event [cond] /``: the events, the condition, and ``/`` when content runs."""
    parts: list[str] = []
    if transition.events:
        parts.append(_cut(" ".join(transition.events)))
    if transition.cond is not None:
        parts.append(f"[{_cut(' '.join(transition.cond.source.split()))}]")
    if transition.content:
        parts.append("/")
    return " ".join(parts)


def _cut(text: str) -> str:
    """``text`` within ``MAX_LABEL`` characters, its end replaced by an ellipsis if cut."""
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "\u2026"


def _edge_ends(transition: TransitionNode) -> dict[int, None]:
    """The states a transition's edges go to, each once, in order (a targetless one loops
    back to its source): a target named again would draw its edge, label and all, again."""
    return dict.fromkeys(transition.targets or (transition.source,))


def state_label(state: StateNode) -> str:
    """What a state is called in a diagram."""
    if state.kind == "history":
        return "H*" if state.history_deep else "H"
    return state.id if state.named else f"({state.kind}, line {state.line})"


# -- Mermaid ----------------------------------------------------------------------------


def to_mermaid(machine: Machine, active: Iterable[int] = ()) -> str:
    """The chart as a Mermaid ``stateDiagram-v2``; states in ``active`` are highlighted."""
    lines = ["stateDiagram-v2"]
    if machine.name:
        lines.insert(0, f"---\ntitle: {_mermaid_text(machine.name)}\n---")
    # Mermaid draws an edge inside the innermost composite holding both of its ends.
    edges: dict[int, list[str]] = {}
    initials = _initial_transitions(machine)
    for transition in machine.transitions:
        if transition.index in initials:
            continue
        source = machine.states[transition.source]
        label = transition_label(transition)
        suffix = f" : {_mermaid_text(label)}" if label else ""
        for target in _edge_ends(transition):
            scope = _edge_scope(machine, transition.source, target)
            edges.setdefault(scope, []).append(
                f"{_mid(source)} --> {_mid(machine.states[target])}{suffix}"
            )
    lines.extend(_mermaid_scope(machine, machine.states[0], 1, edges))
    finals = [s for s in machine.states if s.kind == "final"]
    history = [s for s in machine.states if s.kind == "history"]
    on = sorted(set(active))
    lines.append(f"    classDef active fill:{ACTIVE_FILL},stroke:{ACTIVE_STROKE},stroke-width:2px")
    lines.append("    classDef final stroke-width:3px")
    lines.append("    classDef history fill:#e5e7eb")
    if finals:
        lines.append(f"    class {','.join(_mid(s) for s in finals)} final")
    if history:
        lines.append(f"    class {','.join(_mid(s) for s in history)} history")
    shown = [machine.states[i] for i in on if i != 0 and machine.states[i].kind != "history"]
    if shown:
        lines.append(f"    class {','.join(_mid(s) for s in shown)} active")
    return "\n".join(lines) + "\n"


def _edge_scope(machine: Machine, source: int, target: int) -> int:
    """The nearest non-parallel state (or the root) holding both ends of an edge."""
    for ancestor in machine.states[source].ancestors:
        state = machine.states[ancestor]
        if state.kind != "parallel" and ancestor < target <= state.last:
            return ancestor
    return 0


def _mermaid_scope(
    machine: Machine, scope: StateNode, depth: int, edges: dict[int, list[str]]
) -> Iterator[str]:
    pad = "    " * depth
    states = machine.states
    if scope.initial_transition is not None and scope.kind != "parallel":
        for target in _edge_ends(machine.transitions[scope.initial_transition]):
            yield f"{pad}[*] --> {_mid(states[target])}"
    members = [*scope.children, *scope.history]
    for position, index in enumerate(members):
        state = states[index]
        yield f'{pad}state "{_mermaid_text(state_label(state))}" as {_mid(state)}'
        if state.children:
            yield f"{pad}state {_mid(state)} {{"
            yield from _mermaid_scope(machine, state, depth + 1, edges)
            yield f"{pad}}}"
        if state.kind == "final":
            yield f"{pad}{_mid(state)} --> [*]"
        if scope.kind == "parallel" and position < len(scope.children) - 1:
            yield f"{pad}--"
    for edge in edges.get(scope.index, ()):
        yield f"{pad}{edge}"


def _initial_transitions(machine: Machine) -> frozenset[int]:
    """Initial transitions are drawn from start markers, not as labelled edges."""
    return frozenset(
        s.initial_transition
        for s in machine.states
        if s.initial_transition is not None and s.kind != "history"
    )


def _mid(state: StateNode) -> str:
    return f"s{state.index}"


def _mermaid_text(text: str) -> str:
    """Label text Mermaid cannot misread: entity codes for its few special characters."""
    replacements = {"#": "#35;", ";": "#59;", "<": "#lt;", ">": "#gt;", '"': "#quot;"}
    return "".join(replacements.get(ch, ch) for ch in text).replace("\n", " ")


# -- Graphviz DOT -----------------------------------------------------------------------


def to_dot(machine: Machine, active: Iterable[int] = ()) -> str:
    """The chart as a Graphviz ``digraph``; states in ``active`` are filled."""
    on = frozenset(i for i in active if machine.states[i].kind != "history")
    lines = [
        f"digraph {_dot_string(machine.name or 'chart')} {{",
        "  compound=true;",
        "  rankdir=LR;",
        '  node [fontname="Helvetica", fontsize=11];',
        '  edge [fontname="Helvetica", fontsize=10];',
    ]
    lines.extend(_dot_scope(machine, machine.states[0], on, 1))
    initials = _initial_transitions(machine)
    for transition in machine.transitions:
        if transition.index in initials:
            continue
        source = machine.states[transition.source]
        label = transition_label(transition)
        for target in _edge_ends(transition):
            lines.append("  " + _dot_edge(source, machine.states[target], label))
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_scope(machine: Machine, scope: StateNode, on: frozenset[int], depth: int) -> Iterator[str]:
    pad = "  " * depth
    states = machine.states
    if scope.initial_transition is not None and scope.kind != "parallel":
        start = f"{_did(scope)}_start"
        yield f'{pad}{start} [shape=point, width=0.15, label=""];'
        for target in _edge_ends(machine.transitions[scope.initial_transition]):
            yield f"{pad}" + _dot_edge_raw(start, states[target], "")
    for index in (*scope.children, *scope.history):
        state = states[index]
        if state.children:
            style = "dashed" if state.kind == "parallel" else "rounded"
            if index in on:
                style += f',filled"; fillcolor="{ACTIVE_REGION_FILL}'
            yield f"{pad}subgraph cluster_{_did(state)} {{"
            yield f"{pad}  label={_dot_string(state_label(state))};"
            yield f'{pad}  style="{style}";'
            # An invisible anchor lets edges start and end at the cluster's border.
            yield f'{pad}  {_did(state)} [shape=point, style=invis, width=0, label=""];'
            yield from _dot_scope(machine, state, on, depth + 1)
            yield f"{pad}}}"
            continue
        attributes = {
            "final": "shape=doublecircle",
            "history": "shape=circle",
        }.get(state.kind, 'shape=box, style="rounded"')
        if index in on:
            attributes = attributes.replace('style="rounded"', 'style="rounded,filled"')
            if "style=" not in attributes:
                attributes += ', style="filled"'
            attributes += f', fillcolor="{ACTIVE_FILL}", color="{ACTIVE_STROKE}", penwidth=2'
        yield f"{pad}{_did(state)} [label={_dot_string(state_label(state))}, {attributes}];"


def _dot_edge(source: StateNode, target: StateNode, label: str) -> str:
    # Graphviz clips an edge to a cluster's border only when its other end is outside the
    # cluster: a loop on a cluster, or an edge into or out of its own descendant, is drawn
    # on the cluster's anchor.
    tail = bool(source.children) and not _holds(source, target)
    extra = [f"ltail=cluster_{_did(source)}"] if tail else []
    return _dot_edge_raw(_did(source), target, label, extra, clip=not _holds(target, source))


def _holds(outer: StateNode, inner: StateNode) -> bool:
    """Whether ``inner`` is ``outer`` or one of its descendants."""
    return outer.index <= inner.index <= outer.last


def _dot_edge_raw(
    source: str,
    target: StateNode,
    label: str,
    extra: list[str] | None = None,
    *,
    clip: bool = True,
) -> str:
    attributes = list(extra or [])
    if target.children and clip:
        attributes.append(f"lhead=cluster_{_did(target)}")
    if label:
        attributes.append(f"label={_dot_string(label)}")
    suffix = f" [{', '.join(attributes)}]" if attributes else ""
    return f"{source} -> {_did(target)}{suffix};"


def _did(state: StateNode) -> str:
    return f"s{state.index}"


def _dot_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


# -- SVG --------------------------------------------------------------------------------


def to_svg(
    machine: Machine, active: Iterable[int] = (), *, timeout: float = DOT_TIMEOUT_S
) -> bytes:
    """The chart as SVG: ``to_dot`` run through Graphviz's ``dot -Tsvg``.

    Blocking (a subprocess of at most ``timeout`` seconds): run it in a thread from async
    code. Raises ``GraphvizMissing`` when ``dot`` is not on the path, ``DiagramError``
    when it fails or runs out of time.
    """
    return svg_of_dot(to_dot(machine, active).encode(), timeout=timeout)


def svg_of_dot(dot_source: bytes, *, timeout: float = DOT_TIMEOUT_S) -> bytes:
    """DOT source drawn as SVG by Graphviz's ``dot`` (the errors of ``to_svg``)."""
    dot = shutil.which("dot")
    if dot is None:
        raise GraphvizMissing(GRAPHVIZ_HINT)
    try:
        done = subprocess.run(  # noqa: S603 - Graphviz found by which(), one fixed flag, no shell
            [dot, "-Tsvg"], input=dot_source, capture_output=True, timeout=timeout
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DiagramError(f"running {dot} failed: {exc}") from exc
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip()
        raise DiagramError(f"dot failed: {message}")
    return done.stdout
