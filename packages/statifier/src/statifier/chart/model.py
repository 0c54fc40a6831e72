"""The compiled, immutable chart: states, transitions and executable content.

Everything is numbered in document order: ``StateNode.index`` (0 is the synthesized
``<scxml>`` root), ``TransitionNode.index`` (``t_index``), ``ContentNode.c_index`` and
``DataNode.d_index``. Ancestry is an integer range test: ``d`` is a descendant of ``s``
exactly when ``s.index < d <= s.last``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from statifier.errors import Diagnostic

if TYPE_CHECKING:
    from statifier.datamodel import Expression, Location, Script
    from statifier.datamodel.host import HostFunctions

Owner = tuple[str, int] | tuple[str, int, int]
StateKind = Literal["scxml", "state", "parallel", "final", "history"]


@dataclass(frozen=True, slots=True)
class ParamNode:
    """``<param name expr|location>``: ``value`` reads the expression or location."""

    name: str
    value: Expression


@dataclass(frozen=True, slots=True)
class ContentSpec:
    """``<content>``: either an expression, or a static value (text parsed, or markup)."""

    expr: Expression | None
    value: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class ContentNode:
    """Fields shared by every executable-content node."""

    c_index: int
    owner: Owner
    line: int
    column: int = 0
    """1-based column of the element in the source (0 when unknown)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RaiseNode(ContentNode):
    """``<raise event>``."""

    event: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LogNode(ContentNode):
    """``<log label expr>``."""

    label: str | None
    expr: Expression | None


@dataclass(frozen=True, slots=True, kw_only=True)
class AssignNode(ContentNode):
    """``<assign location expr>`` or with inline content (``value``)."""

    location: Location
    expr: Expression | None
    value: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class IfNode(ContentNode):
    """``<if>``/``<elseif>``/``<else>``: branches of (cond or None for else, body)."""

    branches: tuple[tuple[Expression | None, tuple[ContentNode, ...]], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ForeachNode(ContentNode):
    """``<foreach array item index>``."""

    array: Expression
    item: str
    index: str | None
    body: tuple[ContentNode, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptNode(ContentNode):
    """``<script>`` inside executable content."""

    script: Script


@dataclass(frozen=True, slots=True, kw_only=True)
class SendNode(ContentNode):
    """``<send>`` with every attribute form it may use."""

    event: str | None
    eventexpr: Expression | None
    target: str | None
    targetexpr: Expression | None
    type: str | None
    typeexpr: Expression | None
    id: str | None
    idlocation: Location | None
    delay_ms: int | None
    delayexpr: Expression | None
    namelist: tuple[tuple[str, Expression], ...]
    params: tuple[ParamNode, ...]
    content: ContentSpec | None


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelNode(ContentNode):
    """``<cancel sendid|sendidexpr>``."""

    sendid: str | None
    sendidexpr: Expression | None


@dataclass(frozen=True, slots=True)
class DataNode:
    """``<data id expr|src|content>``; ``state`` is the index of the state declaring it."""

    d_index: int
    id: str
    state: int
    expr: Expression | None
    src: str | None
    value: Any
    has_value: bool
    line: int
    column: int = 0


@dataclass(frozen=True, slots=True)
class DoneDataNode:
    """``<donedata>``: content or params."""

    content: ContentSpec | None
    params: tuple[ParamNode, ...]


@dataclass(frozen=True, slots=True)
class InvokeNode:
    """``<invoke>`` declared in a state; ``index`` is its position in that state."""

    state: int
    index: int
    type: str | None
    typeexpr: Expression | None
    src: str | None
    srcexpr: Expression | None
    id: str | None
    idlocation: Location | None
    namelist: tuple[tuple[str, Expression], ...]
    params: tuple[ParamNode, ...]
    content: ContentSpec | None
    autoforward: bool
    finalize: tuple[ContentNode, ...]
    line: int
    column: int = 0


@dataclass(frozen=True, slots=True)
class TransitionNode:
    """One ``<transition>`` (or a synthesized initial transition).

    ``events`` is empty for an eventless transition. ``domain`` is precomputed when no
    target is a history state (it does not depend on the configuration then).
    """

    index: int
    source: int
    events: tuple[str, ...]
    cond: Expression | None
    targets: tuple[int, ...]
    internal: bool
    content: tuple[ContentNode, ...]
    line: int
    column: int = 0
    domain: int | None = None
    static: bool = True


@dataclass(frozen=True, slots=True)
class StateNode:
    """One state (or the root, index 0), with precomputed structure."""

    index: int
    id: str
    named: bool
    kind: StateKind
    parent: int
    depth: int
    last: int
    children: tuple[int, ...]
    history: tuple[int, ...]
    ancestors: tuple[int, ...]
    initial_transition: int | None
    history_deep: bool
    transitions: tuple[int, ...]
    onentry: tuple[tuple[ContentNode, ...], ...]
    onexit: tuple[tuple[ContentNode, ...], ...]
    invokes: tuple[InvokeNode, ...]
    donedata: DoneDataNode | None
    data: tuple[int, ...]
    line: int
    column: int
    atomic: bool = field(init=False)
    """Atomic: a ``<state>`` without child states, or a ``<final>``."""
    compound: bool = field(init=False)
    """Compound: a ``<state>`` (or the root) with child states."""

    def __post_init__(self) -> None:
        # Stored rather than computed: the interpreter asks these on every selection.
        object.__setattr__(self, "atomic", self.kind in ("state", "final") and not self.children)
        object.__setattr__(
            self, "compound", self.kind in ("state", "scxml") and bool(self.children)
        )


@dataclass(frozen=True, slots=True)
class Machine:
    """A compiled chart. Immutable; safe to share between any number of executions."""

    name: str | None
    version: str | None
    identity: str
    source: bytes
    datamodel: str
    late_binding: bool
    states: tuple[StateNode, ...]
    transitions: tuple[TransitionNode, ...]
    content: tuple[ContentNode, ...]
    data: tuple[DataNode, ...]
    scripts: tuple[Script, ...]
    state_ids: dict[str, int]
    warnings: tuple[Diagnostic, ...]
    resolved_sources: dict[str, str] = field(default_factory=dict)
    source_identity: str = ""
    """The identity before canonical forms (``sha256:`` of ``source``, ADR 16): positions
    and registry rows written under it still belong to this machine."""
    has_eventless: bool = True
    """Whether any state has an eventless transition (else eventless selection is skipped)."""
    has_invokes: bool = True
    """Whether any state has an ``<invoke>`` (else the invoke passes are skipped)."""
    functions: HostFunctions | None = field(default=None, compare=False, repr=False)
    """The host functions the chart was compiled with (None: none). Charts an
    ``<invoke type="scxml">`` starts are compiled with them too (ADR 9)."""
    # Memoized, deterministic derived data (entry sets and the like); never observable.
    _cache: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    def state(self, state_id: str) -> StateNode:
        """The state with the given id (KeyError if there is none)."""
        return self.states[self.state_ids[state_id]]

    def is_descendant(self, state: int, ancestor: int) -> bool:
        """Whether ``state`` is a proper descendant of ``ancestor``."""
        return ancestor < state <= self.states[ancestor].last


def transition_domain(
    states: tuple[StateNode, ...], source: int, targets: Iterable[int], internal: bool
) -> int | None:
    """Appendix D ``getTransitionDomain`` over resolved (effective, non-history) targets.

    The compiler precomputes it for every transition without a history target; the core
    calls it for the others once their history is resolved.
    """
    tstates = tuple(targets)
    if not tstates:
        return None
    if source == 0:
        return 0
    src = states[source]
    if internal and src.compound and all(src.index < s <= src.last for s in tstates):
        return source
    return find_lcca(states, (source, *tstates))


def find_lcca(states: tuple[StateNode, ...], state_list: tuple[int, ...]) -> int:
    """Appendix D ``findLCCA``: the nearest compound (or root) proper ancestor of the head
    that contains every other state. A parallel state is never the LCCA."""
    head, tail = state_list[0], state_list[1:]
    # A state's descendants are the range after it, so it holds every state of the tail
    # exactly when it holds the first and the last of them in document order: one pass
    # over the tail, not one for each ancestor of the head.
    low = min(tail, default=head)
    high = max(tail, default=head)
    for anc in states[head].ancestors:
        node = states[anc]
        if node.kind == "parallel":
            continue
        if anc < low and high <= node.last:
            return anc
    return 0
