"""Compile SCXML source into an immutable ``Machine``.

Three passes over a located XML tree: number every state in document order, then
build transitions, executable content, data and invocations in document order (so
``t_index``/``c_index``/``d_index`` follow the document), then derive the structural
tables (subtree ranges, ancestors, static transition domains). Every problem found is
collected; if any is an error, ``ChartError`` carries them all.
"""

from __future__ import annotations

import contextlib
import functools
import gc
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from statifier import datamodel as dm
from statifier.chart.durations import InvalidDuration, parse_duration
from statifier.chart.identity import canonical_form, identity_of, source_identity
from statifier.chart.model import (
    AssignNode,
    CancelNode,
    ContentNode,
    ContentSpec,
    DataNode,
    DoneDataNode,
    ForeachNode,
    IfNode,
    InvokeNode,
    LogNode,
    Machine,
    Owner,
    ParamNode,
    RaiseNode,
    ScriptNode,
    SendNode,
    StateKind,
    StateNode,
    TransitionNode,
    transition_domain,
)
from statifier.chart.xmltree import XNode, dedented, parse, serialize
from statifier.core.planner import BASIC_HTTP_SEND_TYPES
from statifier.datamodel.host import HostFunction, HostFunctionError, HostFunctions
from statifier.errors import ChartError, Diagnostic
from statifier.suggest import (
    LIKENESS_PAIRS,
    LikenessBudget,
    NearSpellings,
    bounded_did_you_mean,
)
from statifier.values import brief

Resolver = Callable[[str], str]
"""Maps a ``src`` URI to its text; raising any exception means "unreachable"."""

DATAMODELS = dm.DATAMODEL_NAMES

_STATE_TAGS = ("state", "parallel", "final", "history")

MAX_CHART_BYTES = 8 * 1024 * 1024
"""Larger chart sources are refused before they are parsed."""

MAX_STATES = 20_000
"""Charts with more states are refused (every state costs compile time and memory)."""

MAX_DIAGNOSTICS = 200
"""Compilation stops after this many problems: the rest would only repeat them."""

TARGET_LIKENESS_PAIRS = 8 * LIKENESS_PAIRS
"""The character pairs one compilation's hints for wrong targets compare by likeness in
all (``suggest.LikenessBudget``); past them, a hint offers only ids one edit away. A few
wrong targets among a hundred ids never reach it; 200 wrong targets of 128 characters
among ids alike but for their ends took 1.7 s to refuse without it."""

MAX_CODE_LENGTH = 256 * 1024
"""The most characters of expressions, locations and scripts one chart may hold in all.

Compiling code costs time and memory per character (a syntax tree, then closures, about
a microsecond and a few hundred bytes per character for the densest code), far more than
the rest of a chart: each expression is bounded on its own, and this bounds their sum, so
a chart at every limit compiles within a second. Beyond it the chart is refused
(``too-much-code``) before the code past the limit is parsed."""
_EXECUTABLE = (
    "raise",
    "if",
    "elseif",
    "else",
    "foreach",
    "log",
    "assign",
    "script",
    "send",
    "cancel",
)

_ATTRS: dict[str, frozenset[str]] = {
    "scxml": frozenset({"initial", "name", "version", "datamodel", "binding", "exmode"}),
    "state": frozenset({"id", "initial"}),
    "parallel": frozenset({"id"}),
    "final": frozenset({"id"}),
    "history": frozenset({"id", "type"}),
    "transition": frozenset({"event", "cond", "target", "type"}),
    "initial": frozenset(),
    "onentry": frozenset(),
    "onexit": frozenset(),
    "datamodel": frozenset(),
    "data": frozenset({"id", "src", "expr"}),
    "donedata": frozenset(),
    "content": frozenset({"expr"}),
    "param": frozenset({"name", "expr", "location"}),
    "raise": frozenset({"event"}),
    "if": frozenset({"cond"}),
    "elseif": frozenset({"cond"}),
    "else": frozenset(),
    "foreach": frozenset({"array", "item", "index"}),
    "log": frozenset({"label", "expr"}),
    "assign": frozenset({"location", "expr"}),
    "script": frozenset({"src"}),
    "send": frozenset(
        {
            "event",
            "eventexpr",
            "target",
            "targetexpr",
            "type",
            "typeexpr",
            "id",
            "idlocation",
            "delay",
            "delayexpr",
            "namelist",
        }
    ),
    "cancel": frozenset({"sendid", "sendidexpr"}),
    "invoke": frozenset(
        {"type", "typeexpr", "src", "srcexpr", "id", "idlocation", "namelist", "autoforward"}
    ),
    "finalize": frozenset(),
}

_CHILDREN: dict[str, frozenset[str]] = {
    "scxml": frozenset({"state", "parallel", "final", "datamodel", "script"}),
    "state": frozenset(
        {
            "onentry",
            "onexit",
            "transition",
            "initial",
            "state",
            "parallel",
            "final",
            "history",
            "datamodel",
            "invoke",
        }
    ),
    "parallel": frozenset(
        {"onentry", "onexit", "transition", "state", "parallel", "history", "datamodel", "invoke"}
    ),
    "final": frozenset({"onentry", "onexit", "donedata"}),
    "history": frozenset({"transition"}),
    "initial": frozenset({"transition"}),
    "datamodel": frozenset({"data"}),
    "donedata": frozenset({"content", "param"}),
    "invoke": frozenset({"param", "finalize", "content"}),
    "send": frozenset({"param", "content"}),
}

_EXCLUSIVE: dict[str, tuple[tuple[str, str], ...]] = {
    "send": (
        ("event", "eventexpr"),
        ("target", "targetexpr"),
        ("type", "typeexpr"),
        ("id", "idlocation"),
        ("delay", "delayexpr"),
    ),
    "invoke": (("type", "typeexpr"), ("src", "srcexpr"), ("id", "idlocation")),
    "cancel": (("sendid", "sendidexpr"),),
    "param": (("expr", "location"),),
    "data": (("src", "expr"),),
}

_REPORTED_ELSEWHERE: frozenset[tuple[str, str]] = frozenset(
    {("parallel", "initial"), ("final", "initial"), ("final", "transition")}
    | {("scxml", "history"), ("final", "history")}
)
"""(element, attribute or child) pairs a dedicated check reports with a clearer message
(``invalid-initial``, ``invalid-child``, ``history-misuse``): one diagnostic per problem."""


# Compiled expressions are immutable values, so identical short sources (common in
# generated charts: every "x + 1") share one compilation, across charts too. Only short
# ones: the memo outlives every chart, and a long expression compiles to a large closure
# tree, so the memo's memory is bounded by count times length.
_MEMO_SOURCE_LENGTH = 256


@functools.lru_cache(maxsize=2048)
def _cached_expression(
    datamodel: str, source: str, functions: HostFunctions | None
) -> dm.Expression:
    return dm.datamodel_for(datamodel).compile_expression(source, functions)


@functools.lru_cache(maxsize=1024)
def _cached_location(datamodel: str, source: str, functions: HostFunctions | None) -> dm.Location:
    return dm.datamodel_for(datamodel).compile_location(source, functions)


def _expression(
    datamodel: dm.Datamodel, source: str, functions: HostFunctions | None
) -> dm.Expression:
    if len(source) > _MEMO_SOURCE_LENGTH:
        return datamodel.compile_expression(source, functions)
    return _cached_expression(datamodel.name, source, functions)


def _location(datamodel: dm.Datamodel, source: str, functions: HostFunctions | None) -> dm.Location:
    if len(source) > _MEMO_SOURCE_LENGTH:
        return datamodel.compile_location(source, functions)
    return _cached_location(datamodel.name, source, functions)


def compile_chart(
    source: str | bytes,
    *,
    name: str | None = None,
    version: str | None = None,
    resolver: Resolver | None = None,
    functions: Mapping[str, HostFunction] | None = None,
) -> Machine:
    """Parse, validate and compile a chart. Raises ``ChartError`` listing every error
    (the first ``MAX_DIAGNOSTICS`` of them).

    ``functions`` are host functions the chart's expressions may call by name (see
    ``statifier.datamodel.host``); a call to any other non-built-in name is an error.
    Charts larger than ``MAX_CHART_BYTES`` or with more than ``MAX_STATES`` states are
    refused (``too-large``).
    """
    raw = source.encode("utf-8") if isinstance(source, str) else bytes(source)
    if len(raw) > MAX_CHART_BYTES:
        raise ChartError(
            [
                Diagnostic(
                    "too-large",
                    f"the chart has {len(raw)} bytes; the limit is {MAX_CHART_BYTES}",
                    1,
                    1,
                )
            ]
        )
    host = host_functions(functions)
    with _collector_paused():
        root = parse(raw)
        compiler = _Compiler(raw, name, version, resolver)
        compiler.functions = host
        return compiler.run(root)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a chart compiles.

    A compile allocates a syntax tree and a few closures per character of code, nearly all
    of it kept (the machine) or freed by reference counting (the trees); the collector's
    full passes over everything allocated so far tripled the time of a chart with much
    code, finding nothing. A compile is bounded (``MAX_CHART_BYTES``, ``MAX_CODE_LENGTH``)
    and synchronous, so the pause is too; the collector's state is restored after.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def host_functions(functions: Mapping[str, HostFunction] | None) -> HostFunctions | None:
    """The registry for ``compile_chart``'s ``functions`` (None when empty).

    Raises ``HostFunctionError`` for a bad name, or one that shadows a built-in function.
    """
    host = HostFunctions.of(functions)
    shadowed = sorted(set(host) & set(dm.FUNCTIONS))
    if shadowed:
        raise HostFunctionError(f"host functions cannot shadow built-in functions: {shadowed}")
    return host if host else None


@dataclass
class _Draft:
    index: int
    id: str
    named: bool
    kind: StateKind
    parent: int
    node: XNode
    depth: int
    children: list[int] = field(default_factory=list)
    history: list[int] = field(default_factory=list)
    last: int = 0
    transitions: list[int] = field(default_factory=list)
    initial_transition: int | None = None
    onentry: list[tuple[ContentNode, ...]] = field(default_factory=list)
    onexit: list[tuple[ContentNode, ...]] = field(default_factory=list)
    invokes: list[InvokeNode] = field(default_factory=list)
    donedata: DoneDataNode | None = None
    data: list[int] = field(default_factory=list)


@dataclass
class _DraftTransition:
    index: int
    source: int
    events: tuple[str, ...]
    cond: dm.Expression | None
    targets: tuple[int, ...]
    internal: bool
    content: tuple[ContentNode, ...]
    line: int
    column: int = 0


class _Compiler:
    def __init__(
        self, raw: bytes, name: str | None, version: str | None, resolver: Resolver | None
    ) -> None:
        self.raw = raw
        self.name = name
        self.version = version
        self.resolver = resolver
        self.functions: HostFunctions | None = None
        self.diagnostics: list[Diagnostic] = []
        self.states: list[_Draft] = []
        self.by_node: dict[int, int] = {}
        self.ids: dict[str, int] = {}
        self._id_spellings: NearSpellings | None = None
        self.target_likeness = LikenessBudget(TARGET_LIKENESS_PAIRS)
        self.transitions: list[_DraftTransition] = []
        self.content: list[ContentNode] = []
        self.data: list[DataNode] = []
        self.data_ids: set[str] = set()
        """The ids of ``data``, for the duplicate check (a scan of ``data`` per <data> made
        a chart of many data quadratic)."""
        self.scripts: list[dm.Script] = []
        self.resolved: dict[str, str] = {}
        self.datamodel: dm.Datamodel = dm.PYTHON
        self.code_length = 0
        """Characters of code compiled so far (see ``MAX_CODE_LENGTH``)."""

    # -- diagnostics -------------------------------------------------------------------

    def error(self, node: XNode, code: str, message: str) -> None:
        self.report(Diagnostic(code, message, node.line, node.column))

    def warn(self, node: XNode, code: str, message: str) -> None:
        self.report(Diagnostic(code, message, node.line, node.column, "warning"))

    def report(self, diagnostic: Diagnostic) -> None:
        """Collect a diagnostic; past ``MAX_DIAGNOSTICS`` compilation stops at once."""
        self.diagnostics.append(diagnostic)
        if len(self.diagnostics) >= MAX_DIAGNOSTICS:
            errors = [d for d in self.diagnostics if d.severity == "error"]
            errors.append(
                Diagnostic(
                    "too-many-errors",
                    f"compilation stopped after {MAX_DIAGNOSTICS} problems",
                    diagnostic.line,
                    diagnostic.column,
                )
            )
            raise ChartError(errors)

    def spend(self, element: XNode, source: str) -> None:
        """Count ``source`` against ``MAX_CODE_LENGTH`` before it is compiled; past the
        limit, compilation stops at once (what is left would cost what the limit bounds)."""
        self.code_length += len(source)
        if self.code_length > MAX_CODE_LENGTH:
            self.diagnostics.append(
                Diagnostic(
                    "too-much-code",
                    f"the chart's expressions and scripts are over {MAX_CODE_LENGTH} "
                    "characters in all",
                    element.line,
                    element.column,
                )
            )
            raise ChartError([d for d in self.diagnostics if d.severity == "error"])

    # -- entry -------------------------------------------------------------------------

    def run(self, root: XNode) -> Machine:
        if not root.is_scxml("scxml"):
            self.error(root, "not-scxml", "the root element must be <scxml> in the SCXML namespace")
            raise ChartError(self.diagnostics)
        self.check_element(root)
        datamodel = root.attr("datamodel") or dm.DEFAULT_DATAMODEL
        try:
            self.datamodel = dm.datamodel_for(datamodel)
        except KeyError:
            self.error(
                root,
                "unsupported-datamodel",
                f"datamodel {datamodel!r} is not supported (use one of {', '.join(DATAMODELS)})",
            )
        except dm.DatamodelUnavailable as exc:
            self.error(root, "datamodel-unavailable", str(exc))
            raise ChartError(self.diagnostics) from None
        if self.functions and not self.datamodel.supports_host_functions:
            self.error(
                root,
                "host-functions-unsupported",
                f"the {self.datamodel.name} datamodel cannot call host functions yet",
            )
        if self.functions:
            shadowed = sorted(set(self.functions) & self.datamodel.builtin_names)
            if shadowed:
                raise HostFunctionError(
                    f"host functions cannot shadow built-in functions: {shadowed}"
                )
        binding = root.attr("binding") or "early"
        if binding not in ("early", "late"):
            self.error(
                root, "invalid-attribute", f"binding must be 'early' or 'late', not {binding!r}"
            )
        version = root.attr("version")
        if version is not None and version != "1.0":
            self.error(root, "invalid-attribute", f"version must be '1.0', not {version!r}")

        chart_name = root.attr("name")
        self.states.append(_Draft(0, chart_name or "scxml", False, "scxml", -1, root, 0))
        self.by_node[id(root)] = 0
        self.number_states(root, 0)
        if len(self.states) == 1:
            self.error(root, "no-states", "a chart needs a <state>, <parallel> or <final>")
            raise ChartError([d for d in self.diagnostics if d.severity == "error"])
        for draft in reversed(self.states):
            draft.last = max([draft.index, *(self.states[c].last for c in draft.children)])
            draft.last = max([draft.last, *draft.history])
        self.build_state(root, 0)
        self.build_initials()

        errors = [d for d in self.diagnostics if d.severity == "error"]
        if errors:
            raise ChartError(errors)
        return self.freeze(datamodel, binding == "late", chart_name, root)

    # -- pass 1: states ----------------------------------------------------------------

    def number_states(self, element: XNode, parent: int) -> None:
        for child in element.children:
            if not child.is_scxml() or child.tag not in _STATE_TAGS:
                continue
            index = len(self.states)
            if index > MAX_STATES:
                self.error(child, "too-large", f"the chart has more than {MAX_STATES} states")
                raise ChartError([d for d in self.diagnostics if d.severity == "error"])
            state_id = child.attr("id")
            named = bool(state_id)
            if not state_id:
                state_id = f"__state{index}"
            elif state_id in self.ids:
                self.error(child, "duplicate-id", f"duplicate state id {state_id!r}")
            else:
                self.ids[state_id] = index
            kind: StateKind = child.tag  # type: ignore[assignment]
            draft = _Draft(
                index, state_id, named, kind, parent, child, self.states[parent].depth + 1
            )
            self.states.append(draft)
            self.by_node[id(child)] = index
            if kind == "history":
                self.states[parent].history.append(index)
            else:
                self.states[parent].children.append(index)
            self.number_states(child, index)

    # -- pass 2: everything in document order ------------------------------------------

    def build_state(self, element: XNode, index: int) -> None:  # noqa: C901 - see below
        # One branch per kind of child a state may hold, taken in document order: the
        # order the content and the diagnostics must come in.
        draft = self.states[index]
        if index != 0:
            self.check_element(element)
        if draft.kind == "history":
            self.build_history(element, draft)
            return
        onentry = onexit = 0
        for child in element.children:
            if not child.is_scxml():
                continue
            tag = child.tag
            if tag in _STATE_TAGS:
                self.build_state(child, self.by_node[id(child)])
            elif tag == "transition":
                self.check_element(child)
                self.build_transition(child, index)
            elif tag == "onentry":
                self.check_element(child, executable=True)
                owner: Owner = ("onentry", index, onentry)
                onentry += 1
                draft.onentry.append(self.block(child.children, owner))
            elif tag == "onexit":
                self.check_element(child, executable=True)
                owner = ("onexit", index, onexit)
                onexit += 1
                draft.onexit.append(self.block(child.children, owner))
            elif tag == "datamodel":
                self.check_element(child)
                for data in child.children:
                    if data.is_scxml("data"):
                        self.build_data(data, index)
            elif tag == "invoke":
                draft.invokes.append(self.build_invoke(child, index, len(draft.invokes)))
            elif tag == "donedata":
                if draft.donedata is not None:
                    self.error(child, "duplicate-element", "a <final> has at most one <donedata>")
                draft.donedata = self.build_donedata(child)
            elif tag == "initial":
                self.check_element(child)
                if draft.initial_transition is not None:
                    self.error(child, "invalid-initial", "a state has at most one <initial>")
                else:
                    self.build_initial_element(draft, child)
            elif tag == "script" and index == 0:
                self.check_element(child)
                script = self.build_script(child)
                if script is not None:
                    self.scripts.append(script)

    def build_history(self, element: XNode, draft: _Draft) -> None:
        parent = self.states[draft.parent]
        if parent.kind not in ("state", "parallel") or draft.parent == 0:
            self.error(
                element, "history-misuse", "<history> must be a child of <state> or <parallel>"
            )
        kind = element.attr("type") or "shallow"
        if kind not in ("shallow", "deep"):
            self.error(
                element,
                "invalid-attribute",
                f"history type must be 'shallow' or 'deep', not {kind!r}",
            )
        transitions = [c for c in element.children if c.is_scxml("transition")]
        if len(transitions) > 1:
            self.error(element, "history-misuse", "<history> has at most one default <transition>")
        for transition in transitions:
            self.check_element(transition)
            if transition.attr("event") is not None or transition.attr("cond") is not None:
                self.error(
                    transition,
                    "history-misuse",
                    "a history default transition has no event or cond",
                )
            t_index = self.build_transition(transition, draft.index, record=False)
            if t_index is not None:
                targets = self.transitions[t_index].targets
                if not targets:
                    self.error(
                        transition, "history-misuse", "a history default transition needs a target"
                    )
                for target in targets:
                    if not (parent.index < target <= parent.last) or target == draft.index:
                        self.error(
                            transition,
                            "history-misuse",
                            f"history default target {brief(self.states[target].id)} is not "
                            f"inside {brief(parent.id)}",
                        )
                draft.initial_transition = t_index

    def build_transition(self, element: XNode, source: int, *, record: bool = True) -> int | None:
        draft = self.states[source]
        if draft.kind == "final":
            self.error(element, "invalid-child", "<final> states cannot have transitions")
        event = element.attr("event")
        events = tuple(event.split()) if event is not None else ()
        if event is not None and not events:
            self.error(
                element, "invalid-attribute", "event must name at least one event descriptor"
            )
        for descriptor in events:
            if not _valid_descriptor(descriptor):
                self.error(element, "invalid-event", f"invalid event descriptor {descriptor!r}")
        cond = self.expression(element, "cond")
        targets = self.resolve_targets(element, element.attr("target"))
        kind = element.attr("type") or "external"
        if kind not in ("internal", "external"):
            self.error(
                element,
                "invalid-attribute",
                f"transition type must be 'internal' or 'external', not {kind!r}",
            )
        index = len(self.transitions)
        content = self.block(element.children, ("transition", index))
        self.transitions.append(
            _DraftTransition(
                index,
                source,
                events,
                cond,
                targets,
                kind == "internal",
                content,
                element.line,
                element.column,
            )
        )
        if record:
            draft.transitions.append(index)
        return index

    def id_spellings(self) -> NearSpellings:
        """The state ids one edit from a name, for hints past ``LIKENESS_CANDIDATES`` ids:
        made once (targets are resolved after every id is known), where comparing each
        unknown target with every id made a chart of 20,000 states and 200 wrong targets
        take minutes to refuse."""
        if self._id_spellings is None:
            self._id_spellings = NearSpellings(self.ids)
        return self._id_spellings

    def resolve_targets(self, element: XNode, text: str | None) -> tuple[int, ...]:
        if text is None:
            return ()
        targets: list[int] = []
        tokens = text.split()
        if not tokens:
            self.error(element, "invalid-target", "target must name at least one state")
        for token in tokens:
            target = self.ids.get(token)
            if target is None:
                self.error(
                    element,
                    "unknown-target",
                    f"transition target {token!r} is not a state id"
                    + bounded_did_you_mean(
                        token, self.ids, self.id_spellings, self.target_likeness
                    ),
                )
            else:
                targets.append(target)
        # A state named twice is entered once (Appendix D's entry set is a set, entered in
        # document order): repeats are dropped here, where each cost every later pass over
        # the targets a walk up the state's ancestors.
        targets = list(dict.fromkeys(targets))
        if len(targets) > 1:
            self.check_together(element, targets)
        return tuple(targets)

    def check_together(self, element: XNode, targets: list[int]) -> None:
        """Refuse targets that would make two children of one compound state active
        (SCXML 3.11: a document must only lead to legal configurations)."""
        states = self.states
        # each state on a target's path -> (its child on that path, that target). The path
        # above a state is the same for every target under it, so a walk up stops at the
        # first state an earlier walk passed: from there up it was checked already, and a
        # transition to thousands of states under one deep state walks each state once.
        chosen: dict[int, tuple[int, int]] = {}
        for target in targets:
            if states[target].kind == "history":
                continue  # entered through its default or record: not active itself
            child, parent = target, states[target].parent
            while parent >= 0:
                passed = chosen.get(parent)
                if passed is None:
                    chosen[parent] = (child, target)
                    child, parent = parent, states[parent].parent
                    continue
                first_child, first = passed
                if first_child != child and states[parent].kind != "parallel":
                    where = (
                        f"in {states[parent].id!r}, which is not a <parallel>"
                        if parent
                        else "top-level states"
                    )
                    self.error(
                        element,
                        "invalid-target",
                        f"targets {states[first].id!r} and {states[target].id!r} cannot be "
                        f"active together: both are {where}",
                    )
                    return
                break

    def build_initials(self) -> None:
        """Synthesize or build each compound state's initial transition (and the root's)."""
        for draft in self.states:
            if draft.kind not in ("state", "scxml"):
                if draft.kind in ("parallel", "final") and draft.node.attr("initial") is not None:
                    self.error(
                        draft.node, "invalid-initial", f"<{draft.kind}> cannot have an initial"
                    )
                continue
            element = draft.node
            initial_attr = element.attr("initial")
            initial_elements = [c for c in element.children if c.is_scxml("initial")]
            if not draft.children:
                if initial_attr is not None or initial_elements:
                    self.error(
                        element,
                        "invalid-initial",
                        f"atomic state {draft.id!r} cannot have an initial",
                    )
                continue
            if initial_attr is not None and initial_elements:
                self.error(
                    element,
                    "invalid-initial",
                    "use either the initial attribute or <initial>, not both",
                )
            if initial_elements:
                continue
            if initial_attr is not None:
                targets = self.resolve_targets(element, initial_attr)
                line = element.line
            else:
                targets = (draft.children[0],)
                line = element.line
            for target in targets:
                if not (draft.index < target <= draft.last):
                    self.error(
                        element,
                        "invalid-initial",
                        f"initial state {brief(self.states[target].id)} is not inside "
                        f"{brief(draft.id)}",
                    )
            index = len(self.transitions)
            self.transitions.append(
                _DraftTransition(
                    index, draft.index, (), None, targets, False, (), line, element.column
                )
            )
            draft.initial_transition = index

    def build_initial_element(self, draft: _Draft, element: XNode) -> None:
        transitions = [c for c in element.children if c.is_scxml("transition")]
        if len(transitions) != 1:
            self.error(
                element, "invalid-initial", "<initial> must contain exactly one <transition>"
            )
            return
        transition = transitions[0]
        if transition.attr("event") is not None or transition.attr("cond") is not None:
            self.error(
                transition, "invalid-initial", "an <initial> transition has no event or cond"
            )
        t_index = self.build_transition(transition, draft.index, record=False)
        if t_index is None:
            return
        targets = self.transitions[t_index].targets
        if not targets:
            self.error(transition, "invalid-initial", "an <initial> transition needs a target")
        for target in targets:
            if not (draft.index < target <= draft.last):
                self.error(
                    transition,
                    "invalid-initial",
                    f"initial target {brief(self.states[target].id)} is not inside "
                    f"{brief(draft.id)}",
                )
        draft.initial_transition = t_index

    # -- data, donedata, invoke ------------------------------------------------------

    def build_data(self, element: XNode, state: int) -> None:
        self.check_element(element)
        data_id = element.attr("id")
        if not data_id:
            self.error(element, "missing-attribute", "<data> needs an id")
            return
        if not self.datamodel.is_identifier(data_id):
            self.error(element, "invalid-id", f"data id {data_id!r} is not a valid variable name")
        elif data_id in self.data_ids:
            self.error(element, "duplicate-id", f"duplicate data id {data_id!r}")
        if data_id.startswith("_"):
            self.error(
                element, "invalid-id", f"data id {data_id!r} may not start with '_' (reserved)"
            )
        expr = self.expression(element, "expr")
        src = element.attr("src")
        value: Any = None
        has_value = False
        inline = self.inline_value(element)
        if inline is not _ABSENT:
            if expr is not None or src is not None:
                self.error(
                    element, "exclusive-attributes", "<data> has either expr, src or content"
                )
            value, has_value = inline, True
        elif src is not None and self.resolver is not None:
            try:
                text = self.resolver(src)
            except Exception as exc:  # a resolver failure means "unreachable": runtime error
                self.warn(
                    element, "unresolved-src", f"data src {src!r} could not be resolved: {exc}"
                )
            else:
                self.resolved[src] = text
                value, has_value = self.datamodel.parse_inline_content(text), True
        index = len(self.data)
        self.data_ids.add(data_id)
        self.data.append(
            DataNode(
                index, data_id, state, expr, src, value, has_value, element.line, element.column
            )
        )
        self.states[state].data.append(index)

    def build_donedata(self, element: XNode) -> DoneDataNode:
        self.check_element(element)
        contents = [c for c in element.children if c.is_scxml("content")]
        params = [c for c in element.children if c.is_scxml("param")]
        if contents and params:
            self.error(element, "exclusive-children", "<donedata> has either <content> or <param>s")
        if len(contents) > 1:
            self.error(element, "duplicate-element", "<donedata> has at most one <content>")
        return DoneDataNode(
            self.build_content(contents[0]) if contents else None,
            tuple(p for p in (self.build_param(c) for c in params) if p is not None),
        )

    def build_invoke(self, element: XNode, state: int, index: int) -> InvokeNode:
        self.check_element(element)
        contents = [c for c in element.children if c.is_scxml("content")]
        params = [c for c in element.children if c.is_scxml("param")]
        finalizes = [c for c in element.children if c.is_scxml("finalize")]
        if len(finalizes) > 1:
            self.error(element, "duplicate-element", "<invoke> has at most one <finalize>")
        if len(contents) > 1:
            self.error(element, "duplicate-element", "<invoke> has at most one <content>")
        if contents and (element.attr("src") is not None or element.attr("srcexpr") is not None):
            self.error(
                element, "exclusive-attributes", "<invoke> has either src/srcexpr or <content>"
            )
        if params and element.attr("namelist") is not None:
            self.error(element, "exclusive-attributes", "<invoke> has either namelist or <param>s")
        autoforward = element.attr("autoforward") or "false"
        if autoforward not in ("true", "false"):
            self.error(
                element,
                "invalid-attribute",
                f"autoforward must be 'true' or 'false', not {autoforward!r}",
            )
        finalize: tuple[ContentNode, ...] = ()
        if finalizes:
            self.check_element(finalizes[0], executable=True)
            for node in finalizes[0].children:
                if node.is_scxml("raise") or node.is_scxml("send"):
                    self.error(node, "invalid-child", f"<finalize> cannot contain <{node.tag}>")
            finalize = self.block(finalizes[0].children, ("finalize", state, index))
        return InvokeNode(
            state=state,
            index=index,
            type=element.attr("type"),
            typeexpr=self.expression(element, "typeexpr"),
            src=element.attr("src"),
            srcexpr=self.expression(element, "srcexpr"),
            id=element.attr("id"),
            idlocation=self.location(element, "idlocation"),
            namelist=self.namelist(element),
            params=tuple(p for p in (self.build_param(c) for c in params) if p is not None),
            content=self.build_content(contents[0]) if contents else None,
            autoforward=autoforward == "true",
            finalize=finalize,
            line=element.line,
            column=element.column,
        )

    def build_param(self, element: XNode) -> ParamNode | None:
        self.check_element(element)
        name = element.attr("name")
        if not name:
            self.error(element, "missing-attribute", "<param> needs a name")
            return None
        value = self.expression(element, "expr")
        if element.attr("expr") is None:
            location = element.attr("location")
            if location is None:
                self.error(element, "missing-attribute", "<param> needs expr or location")
                return None
            value = self.compile_expr(element, location)
        return ParamNode(name, value) if value is not None else None

    def build_content(self, element: XNode) -> ContentSpec:
        self.check_element(element)
        expr = self.expression(element, "expr")
        inline = self.inline_value(element)
        if expr is not None and inline is not _ABSENT:
            self.error(element, "exclusive-attributes", "<content> has either expr or children")
        return ContentSpec(expr, None if inline is _ABSENT else inline)

    def build_script(self, element: XNode) -> dm.Script | None:
        src = element.attr("src")
        body = element.text
        if src is not None:
            if body.strip():
                self.error(element, "exclusive-attributes", "<script> has either src or a body")
            if self.resolver is None:
                self.error(element, "unresolved-src", f"script src {src!r}: no resolver was given")
                return None
            try:
                body = self.resolver(src)
            except Exception as exc:
                self.error(
                    element, "unresolved-src", f"script src {src!r} could not be resolved: {exc}"
                )
                return None
            self.resolved[src] = body
        source = dedented(body)
        self.spend(element, source)
        try:
            return self.datamodel.compile_script(source, self.functions)
        except dm.ExpressionSyntaxError as exc:
            if self.datamodel.syntax_errors_at_runtime:
                self.warn(element, "invalid-script", f"script: {exc.message}")
                return self.datamodel.failing_script(source, f"script: {exc.message}")
            self.error(element, "invalid-script", f"script: {exc.message}")
            return None

    # -- executable content ------------------------------------------------------------

    def block(self, elements: Iterable[XNode], owner: Owner) -> tuple[ContentNode, ...]:
        nodes: list[ContentNode] = []
        for element in elements:
            if not element.is_scxml():
                continue
            if element.tag not in _EXECUTABLE or element.tag in ("elseif", "else"):
                if element.tag in _EXECUTABLE:
                    self.error(element, "invalid-child", f"<{element.tag}> must be a child of <if>")
                elif element.tag not in _ATTRS:
                    self.unknown_element(element)
                else:
                    self.error(
                        element, "invalid-child", f"<{element.tag}> is not executable content"
                    )
                continue
            node = self.executable(element, owner)
            if node is not None:
                nodes.append(node)
        return tuple(nodes)

    def reserve(self) -> int:
        self.content.append(None)  # type: ignore[arg-type]
        return len(self.content) - 1

    def executable(  # noqa: C901 - one branch per kind of executable element (a closed set)
        self, element: XNode, owner: Owner
    ) -> ContentNode | None:
        self.check_element(element, executable=element.tag in ("if", "foreach"))
        c_index = self.reserve()
        line, column = element.line, element.column
        tag = element.tag
        node: ContentNode | None = None
        if tag == "raise":
            event = element.attr("event")
            if not event:
                self.error(element, "missing-attribute", "<raise> needs an event")
                event = ""
            node = RaiseNode(c_index=c_index, owner=owner, line=line, column=column, event=event)
        elif tag == "log":
            node = LogNode(
                c_index=c_index,
                owner=owner,
                line=line,
                column=column,
                label=element.attr("label"),
                expr=self.expression(element, "expr"),
            )
        elif tag == "assign":
            node = self.build_assign(element, c_index, owner)
        elif tag == "if":
            node = self.build_if(element, c_index, owner)
        elif tag == "foreach":
            node = self.build_foreach(element, c_index, owner)
        elif tag == "script":
            script = self.build_script(element)
            if script is not None:
                node = ScriptNode(
                    c_index=c_index, owner=owner, line=line, column=column, script=script
                )
        elif tag == "send":
            node = self.build_send(element, c_index, owner)
        elif tag == "cancel":
            sendid = element.attr("sendid")
            sendidexpr = self.expression(element, "sendidexpr")
            if sendid is None and element.attr("sendidexpr") is None:
                self.error(element, "missing-attribute", "<cancel> needs sendid or sendidexpr")
            node = CancelNode(
                c_index=c_index,
                owner=owner,
                line=line,
                column=column,
                sendid=sendid,
                sendidexpr=sendidexpr,
            )
        if node is None:
            node = RaiseNode(c_index=c_index, owner=owner, line=line, column=column, event="")
        self.content[c_index] = node
        return node

    def build_assign(self, element: XNode, c_index: int, owner: Owner) -> ContentNode | None:
        location = self.location(element, "location")
        if element.attr("location") is None:
            self.error(element, "missing-attribute", "<assign> needs a location")
        expr = self.expression(element, "expr")
        inline = self.inline_value(element)
        if expr is not None and inline is not _ABSENT:
            self.error(element, "exclusive-attributes", "<assign> has either expr or content")
        if element.attr("expr") is None and inline is _ABSENT:
            self.error(element, "missing-attribute", "<assign> needs expr or content")
        if location is None:
            return None
        return AssignNode(
            c_index=c_index,
            owner=owner,
            line=element.line,
            column=element.column,
            location=location,
            expr=expr,
            value=None if inline is _ABSENT else inline,
        )

    def build_if(self, element: XNode, c_index: int, owner: Owner) -> ContentNode:
        cond = self.expression(element, "cond")
        if element.attr("cond") is None:
            self.error(element, "missing-attribute", "<if> needs a cond")
        branches: list[tuple[dm.Expression | None, list[ContentNode]]] = [(cond, [])]
        seen_else = False
        for child in element.children:
            if not child.is_scxml():
                continue
            if child.tag in ("elseif", "else"):
                self.check_element(child)
                if seen_else:
                    self.error(child, "invalid-child", f"<{child.tag}> after <else>")
                if child.tag == "elseif":
                    if child.attr("cond") is None:
                        self.error(child, "missing-attribute", "<elseif> needs a cond")
                    branches.append((self.expression(child, "cond"), []))
                else:
                    seen_else = True
                    branches.append((None, []))
                continue
            branches[-1][1].extend(self.block([child], owner))
        return IfNode(
            c_index=c_index,
            owner=owner,
            line=element.line,
            column=element.column,
            branches=tuple((c, tuple(body)) for c, body in branches),
        )

    def build_foreach(self, element: XNode, c_index: int, owner: Owner) -> ContentNode | None:
        array = self.expression(element, "array")
        item = element.attr("item")
        index = element.attr("index")
        if element.attr("array") is None:
            self.error(element, "missing-attribute", "<foreach> needs an array")
        if item is None:
            self.error(element, "missing-attribute", "<foreach> needs an item")
        for label, name in (("item", item), ("index", index)):
            if name is not None and not self.datamodel.is_identifier(name):
                # A datamodel that reports syntax errors at run time fails the foreach with
                # error.execution instead (W3C test 457).
                report = self.warn if self.datamodel.syntax_errors_at_runtime else self.error
                report(
                    element, "invalid-attribute", f"foreach {label} {name!r} is not a variable name"
                )
        body = self.block(element.children, owner)
        if array is None or item is None:
            return None
        return ForeachNode(
            c_index=c_index,
            owner=owner,
            line=element.line,
            column=element.column,
            array=array,
            item=item,
            index=index,
            body=body,
        )

    def build_send(self, element: XNode, c_index: int, owner: Owner) -> ContentNode:
        contents = [c for c in element.children if c.is_scxml("content")]
        params = [c for c in element.children if c.is_scxml("param")]
        if len(contents) > 1:
            self.error(element, "duplicate-element", "<send> has at most one <content>")
        if contents and (params or element.attr("namelist") is not None):
            self.error(
                element, "exclusive-children", "<send> has either <content> or namelist/<param>"
            )
        # A BasicHTTP send may have no event name: its POST then carries none (SCXML D.2).
        nameless = element.attr("type") in BASIC_HTTP_SEND_TYPES or element.attr("typeexpr")
        if (
            element.attr("event") is None
            and element.attr("eventexpr") is None
            and not contents
            and not nameless
        ):
            self.error(element, "missing-attribute", "<send> needs event or eventexpr")
        delay_ms: int | None = None
        delay = element.attr("delay")
        if delay is not None:
            try:
                delay_ms = parse_duration(delay)
            except InvalidDuration as exc:
                self.error(element, "invalid-delay", str(exc))
        target = element.attr("target")
        if target is not None and delay is not None and target == "#_internal":
            self.warn(
                element,
                "delayed-internal",
                "a delayed send to #_internal is delivered by the driver",
            )
        return SendNode(
            c_index=c_index,
            owner=owner,
            line=element.line,
            column=element.column,
            event=element.attr("event"),
            eventexpr=self.expression(element, "eventexpr"),
            target=target,
            targetexpr=self.expression(element, "targetexpr"),
            type=element.attr("type"),
            typeexpr=self.expression(element, "typeexpr"),
            id=element.attr("id"),
            idlocation=self.location(element, "idlocation"),
            delay_ms=delay_ms,
            delayexpr=self.expression(element, "delayexpr"),
            namelist=self.namelist(element),
            params=tuple(p for p in (self.build_param(c) for c in params) if p is not None),
            content=self.build_content(contents[0]) if contents else None,
        )

    # -- helpers -----------------------------------------------------------------------

    def check_element(self, element: XNode, *, executable: bool = False) -> None:
        allowed = _ATTRS.get(element.tag)
        if allowed is None:
            self.unknown_element(element)
            return
        for ns, attr in element.attrs:
            if (
                ns is None
                and attr not in allowed
                and (element.tag, attr) not in _REPORTED_ELSEWHERE
            ):
                self.error(
                    element,
                    "unknown-attribute",
                    f"<{element.tag}> has no attribute {attr!r}"
                    + bounded_did_you_mean(attr, allowed),
                )
        for first, second in _EXCLUSIVE.get(element.tag, ()):
            if element.attr(first) is not None and element.attr(second) is not None:
                self.error(
                    element,
                    "exclusive-attributes",
                    f"<{element.tag}> cannot have both {first!r} and {second!r}",
                )
        children = _CHILDREN.get(element.tag)
        if children is None or executable:
            return
        for child in element.children:
            if child.is_scxml() and child.tag not in children:
                if (element.tag, child.tag) in _REPORTED_ELSEWHERE or (
                    element.tag == "scxml" and child.tag == "script"
                ):
                    continue
                if child.tag not in _ATTRS:
                    self.unknown_element(child)
                else:
                    self.error(
                        child,
                        "invalid-child",
                        f"<{child.tag}> is not allowed inside <{element.tag}>",
                    )

    def unknown_element(self, element: XNode) -> None:
        hint = bounded_did_you_mean(element.tag, (*_ATTRS, "scxml"))
        self.error(element, "unknown-element", f"unknown SCXML element <{element.tag}>{hint}")

    def compile_expr(self, element: XNode, source: str) -> dm.Expression | None:
        self.spend(element, source)
        try:
            return _expression(self.datamodel, source, self.functions)
        except dm.ExpressionSyntaxError as exc:
            message = f"{source!r}: {exc.message}"
            if self.datamodel.syntax_errors_at_runtime:
                self.warn(element, "invalid-expression", message)
                return self.datamodel.failing_expression(source, exc.message)
            self.error(element, "invalid-expression", message)
            return None

    def expression(self, element: XNode, attr: str) -> dm.Expression | None:
        source = element.attr(attr)
        if source is None:
            return None
        return self.compile_expr(element, source)

    def location(self, element: XNode, attr: str) -> dm.Location | None:
        source = element.attr(attr)
        if source is None:
            return None
        self.spend(element, source)
        try:
            return _location(self.datamodel, source, self.functions)
        except dm.ExpressionSyntaxError as exc:
            message = f"{attr} {source!r}: {exc.message}"
            if self.datamodel.syntax_errors_at_runtime:
                self.warn(element, "invalid-location", message)
                return self.datamodel.failing_location(source, exc.message)
            self.error(element, "invalid-location", message)
            return None

    def namelist(self, element: XNode) -> tuple[tuple[str, dm.Expression], ...]:
        text = element.attr("namelist")
        if text is None:
            return ()
        names: list[tuple[str, dm.Expression]] = []
        for name in text.split():
            self.spend(element, name)
            try:
                _location(self.datamodel, name, self.functions)
                names.append((name, _expression(self.datamodel, name, self.functions)))
            except dm.ExpressionSyntaxError as exc:
                message = f"namelist entry {name!r}: {exc.message}"
                if self.datamodel.syntax_errors_at_runtime:
                    self.warn(element, "invalid-namelist", message)
                    names.append((name, self.datamodel.failing_expression(name, exc.message)))
                else:
                    self.error(element, "invalid-namelist", message)
        return tuple(names)

    def inline_value(self, element: XNode) -> Any:
        elements = [c for c in element.children]
        if elements:
            markup = "".join(serialize(c) for c in elements)
            return markup
        text = element.text
        if not text.strip():
            return _ABSENT
        return self.datamodel.parse_inline_content(text)

    # -- pass 3: freeze ----------------------------------------------------------------

    def freeze(self, datamodel: str, late: bool, chart_name: str | None, root: XNode) -> Machine:
        drafts = self.states
        # A parent comes before its children in document order: each chain is its parent's
        # with the parent in front, copied at C speed rather than walked in Python.
        ancestors: list[tuple[int, ...]] = []
        for draft in drafts:
            parent = draft.parent
            ancestors.append((parent, *ancestors[parent]) if parent >= 0 else ())
        states = tuple(
            StateNode(
                index=d.index,
                id=d.id,
                named=d.named,
                kind=d.kind,
                parent=d.parent,
                depth=d.depth,
                last=d.last,
                children=tuple(d.children),
                history=tuple(d.history),
                ancestors=ancestors[d.index],
                initial_transition=d.initial_transition,
                history_deep=d.kind == "history" and d.node.attr("type") == "deep",
                transitions=tuple(d.transitions),
                onentry=tuple(d.onentry),
                onexit=tuple(d.onexit),
                invokes=tuple(d.invokes),
                donedata=d.donedata,
                data=tuple(d.data),
                line=d.node.line,
                column=d.node.column,
            )
            for d in drafts
        )
        transitions = tuple(self.freeze_transition(t, states) for t in self.transitions)
        return Machine(
            name=self.name if self.name is not None else chart_name,
            version=self.version,
            identity=identity_of(canonical_form(root, self.datamodel), self.name, self.version),
            source=self.raw,
            source_identity=source_identity(self.raw, self.name, self.version),
            datamodel=datamodel,
            late_binding=late,
            states=states,
            transitions=transitions,
            content=tuple(self.content),
            data=tuple(self.data),
            scripts=tuple(self.scripts),
            state_ids=dict(self.ids),
            warnings=tuple(d for d in self.diagnostics if d.severity == "warning"),
            resolved_sources=dict(self.resolved),
            has_eventless=any(
                not transitions[t].events for state in states for t in state.transitions
            ),
            has_invokes=any(state.invokes for state in states),
            functions=self.functions,
        )

    def freeze_transition(
        self, t: _DraftTransition, states: tuple[StateNode, ...]
    ) -> TransitionNode:
        static = all(states[s].kind != "history" for s in t.targets)
        domain: int | None = None
        if static and t.targets:
            domain = transition_domain(states, t.source, t.targets, t.internal)
        return TransitionNode(
            index=t.index,
            source=t.source,
            events=t.events,
            cond=t.cond,
            targets=t.targets,
            internal=t.internal,
            content=t.content,
            line=t.line,
            column=t.column,
            domain=domain,
            static=static,
        )


class _Absent:
    pass


_ABSENT: Any = _Absent()


def _valid_descriptor(descriptor: str) -> bool:
    if descriptor in ("*", ".*"):
        return True
    body = descriptor[:-2] if descriptor.endswith(".*") else descriptor.rstrip(".")
    return bool(body) and all(part for part in body.split(".")) and "*" not in body
