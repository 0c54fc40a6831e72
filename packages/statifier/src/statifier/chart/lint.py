"""Static checks on a compiled chart: the mistakes that compile but cannot be what was meant.

``lint(machine)`` reads a ``Machine`` (never the XML) and returns warnings and notes:

- ``undefined-name`` (warning): an expression reads, or a location writes, a variable that
  no ``<data>``, system variable, ``<foreach>`` variable or script assignment defines. At
  run time that is an ``error.execution`` and, in a condition, a transition silently not
  taken.
- ``unreachable-state`` (warning): no transition, initial or history default can ever
  enter the state (reported once, for the outermost such state).
- ``dead-transition`` (warning): a transition that can never be taken, because an earlier
  unconditional transition of the same state always wins, or because its state always
  leaves at once through an unconditional eventless transition.
- ``script-local`` (warning): an ECMAScript ``<script>`` declares a name with ``let``,
  ``const`` or ``class`` at its top level, which stays local to the script, and the chart
  reads that name elsewhere (``var`` makes a chart variable).
- ``unhandled-event`` (warning): an event the chart raises (``<raise>``) or sends to
  itself (a ``<send>`` with no target, or ``#_internal``) that no transition anywhere
  handles: it is taken from the queue and dropped.
- ``misspelled-event`` (warning): a transition waits for an event nothing in the chart
  raises or sends, one edit away from one that something does (``payment.timout`` where
  the chart sends ``payment.timeout``).
- ``external-event`` (info): an event the chart waits for that nothing in it raises or
  sends; it must come from outside (which is fine, and worth a look for typos).

It needs to know which names an expression reads: a datamodel answers through
``names_read`` (and ``names_assigned`` on scripts); an expression that answers None is
skipped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from statifier.chart.model import (
    AssignNode,
    CancelNode,
    ContentNode,
    ContentSpec,
    ForeachNode,
    IfNode,
    InvokeNode,
    LogNode,
    Machine,
    ParamNode,
    RaiseNode,
    ScriptNode,
    SendNode,
    StateNode,
    TransitionNode,
)
from statifier.core.events import DescriptorIndex
from statifier.errors import Diagnostic
from statifier.suggest import HINT_NAME_LENGTH, NearSpellings, did_you_mean

SYSTEM_VARIABLES = frozenset({"_event", "_sessionid", "_name", "_ioprocessors"})
"""Variables every SCXML datamodel defines (spec 5.10)."""

PLATFORM_ERRORS = ("error.execution", "error.communication", "error.platform")
"""Error events the processor itself raises into any chart."""


@dataclass(frozen=True, slots=True)
class _Use:
    """One expression (or location) in the chart, where it is and what it reads."""

    what: str
    source: str
    reads: frozenset[str] | None
    writes: str | None
    line: int
    column: int


def lint(machine: Machine) -> list[Diagnostic]:
    """Every warning and note for ``machine``, ordered by position in the source."""
    hints = _Hints()
    found = [
        *_undefined_names(machine, hints),
        *_script_locals(machine),
        *_unreachable_states(machine),
        *_dead_transitions(machine),
        *_unhandled_events(machine, hints),
        *_external_events(machine, hints),
    ]
    return sorted(found, key=lambda d: (d.line, d.column, d.code))


HINT_BUDGET: Final = 20_000
"""The most comparisons one lint makes for "did you mean" hints, counted in
``HINT_PAIRS``: a name compared with a name it is told of costs one for every
``HINT_PAIRS`` character pairs the two make, and at least one."""

HINT_PAIRS: Final = 256
"""The character pairs (its length times the other's) one comparison of ``HINT_BUDGET``
covers: the likeness of two names (``difflib``) costs in proportion to them, so two names
of 16 characters cost one, two of 128 cost 64."""


class _Hints:
    """The "did you mean" hints of one lint, within ``HINT_BUDGET``: each hint compares a
    name with every name it could be, so a chart of thousands of names would pay
    thousands of times thousands, and long names sharing their characters pay more for
    each (1,000 such names of 75 characters took 19 s when each counted one). Past the
    budget, diagnostics say what they found without a hint."""

    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = HINT_BUDGET

    def did_you_mean(self, name: str, known: Collection[str]) -> str:
        """``suggest.did_you_mean(name, known)``, or "" once the budget is spent."""
        if len(name) > HINT_NAME_LENGTH or len(known) > self.left:
            return ""
        candidates = [k for k in known if len(k) <= HINT_NAME_LENGTH]
        size = len(name)
        cost = sum(max(1, -(-size * len(k) // HINT_PAIRS)) for k in candidates)
        if cost > self.left:
            # Spent: reading the names cost in proportion to them, and no later hint may
            # read as many again.
            self.left = 0
            return ""
        self.left -= cost
        return did_you_mean(name, candidates)


# -- undefined names --------------------------------------------------------------------


def _defined(machine: Machine) -> set[str]:
    """Every name a ``<data>``, system variable, ``<foreach>`` or script defines."""
    defined = set(SYSTEM_VARIABLES)
    defined.update(data.id for data in machine.data)
    for script, _, _ in _scripts(machine):
        defined.update(getattr(script, "names_assigned", None) or ())
    for node in machine.content:
        if isinstance(node, ForeachNode):
            defined.add(node.item)
            if node.index is not None:
                defined.add(node.index)
    return defined


def _scripts(machine: Machine) -> Iterator[tuple[Any, int, int]]:
    """Every compiled script, with the line and column to report it at."""
    for script in machine.scripts:
        yield script, machine.states[0].line, machine.states[0].column
    for node in machine.content:
        if isinstance(node, ScriptNode):
            yield node.script, node.line, node.column


def _undefined_names(machine: Machine, hints: _Hints) -> Iterator[Diagnostic]:
    defined = _defined(machine)
    for script, _, _ in _scripts(machine):  # reported as script-local instead
        defined.update(getattr(script, "names_local", None) or ())
    reported: set[tuple[int, int, str]] = set()
    for use in _uses(machine):
        names = sorted(use.reads or ())
        if use.writes is not None:
            names = [use.writes, *names]
        for name in names:
            if name in defined or (use.line, use.column, name) in reported:
                continue
            reported.add((use.line, use.column, name))
            if name == use.writes:
                problem = f"{use.what} {use.source!r} assigns to {name!r}, which nothing declares"
            else:
                problem = f"{use.what} {use.source!r} reads {name!r}, which nothing defines"
            yield Diagnostic(
                "undefined-name",
                f"{problem} (no <data>, system variable, <foreach> variable or script "
                f"assignment){hints.did_you_mean(name, defined)}",
                use.line,
                use.column,
                "warning",
            )


def _script_locals(machine: Machine) -> Iterator[Diagnostic]:
    scripts = list(_scripts(machine))
    declared = [(s, line, col, getattr(s, "names_local", None)) for s, line, col in scripts]
    if not any(names for *_, names in declared):
        return
    defined = _defined(machine)
    # How many uses and scripts read each name, counted once: a script's local is read
    # elsewhere when something besides that script reads it. Collecting every other read
    # set for each script made a chart of thousands of scripts quadratic.
    readers: Counter[str] = Counter()
    for use in _uses(machine):
        if use.what != "<script>":
            readers.update(use.reads or ())
    copies: Counter[int] = Counter()
    for script, _, _ in scripts:
        readers.update(getattr(script, "names_read", None) or ())
        copies[id(script)] += 1
    for script, line, column, names in declared:
        own = getattr(script, "names_read", None) or frozenset()
        for name in sorted((names or frozenset()) - defined):
            if readers[name] - (copies[id(script)] if name in own else 0) > 0:
                yield Diagnostic(
                    "script-local",
                    f"<script> declares {name!r} with let, const or class at its top level, "
                    f"which keeps it local to the script, but the chart reads {name!r} "
                    "elsewhere: use var to make it a chart variable",
                    line,
                    column,
                    "warning",
                )


def _uses(machine: Machine) -> Iterator[_Use]:
    for transition in machine.transitions:
        if transition.cond is not None:
            yield _expr("condition", transition.cond, transition.line, transition.column)
    for data in machine.data:
        if data.expr is not None:
            yield _expr(f"data {data.id!r} expr", data.expr, data.line, data.column)
    for script in machine.scripts:
        yield _script(script, machine.states[0].line, machine.states[0].column)
    for node in machine.content:
        yield from _content_uses(node)
    for state in machine.states:
        if state.donedata is not None:
            yield from _params("donedata", state.donedata.params, state.line, state.column)
            yield from _content("donedata", state.donedata.content, state.line, state.column)
        for invoke in state.invokes:
            yield from _invoke_uses(invoke)


def _invoke_uses(invoke: InvokeNode) -> Iterator[_Use]:
    line, column = invoke.line, invoke.column
    for attr, value in (("typeexpr", invoke.typeexpr), ("srcexpr", invoke.srcexpr)):
        if value is not None:
            yield _expr(f"<invoke> {attr}", value, line, column)
    if invoke.idlocation is not None:
        yield _location("<invoke> idlocation", invoke.idlocation, line, column)
    for _, expr in invoke.namelist:
        yield _expr("<invoke> namelist", expr, line, column)
    yield from _params("<invoke>", invoke.params, line, column)
    yield from _content("<invoke>", invoke.content, line, column)


def _content_uses(node: ContentNode) -> Iterator[_Use]:
    line, column = node.line, node.column
    if isinstance(node, LogNode) and node.expr is not None:
        yield _expr("<log> expr", node.expr, line, column)
    elif isinstance(node, AssignNode):
        yield _location("<assign> location", node.location, line, column)
        if node.expr is not None:
            yield _expr("<assign> expr", node.expr, line, column)
    elif isinstance(node, IfNode):
        for cond, _ in node.branches:
            if cond is not None:
                yield _expr("condition", cond, line, column)
    elif isinstance(node, ForeachNode):
        yield _expr("<foreach> array", node.array, line, column)
    elif isinstance(node, ScriptNode):
        yield _script(node.script, line, column)
    elif isinstance(node, SendNode):
        yield from _send_uses(node)
    elif isinstance(node, CancelNode) and node.sendidexpr is not None:
        yield _expr("<cancel> sendidexpr", node.sendidexpr, line, column)


def _send_uses(node: SendNode) -> Iterator[_Use]:
    line, column = node.line, node.column
    for attr, value in (
        ("eventexpr", node.eventexpr),
        ("targetexpr", node.targetexpr),
        ("typeexpr", node.typeexpr),
        ("delayexpr", node.delayexpr),
    ):
        if value is not None:
            yield _expr(f"<send> {attr}", value, line, column)
    if node.idlocation is not None:
        yield _location("<send> idlocation", node.idlocation, line, column)
    for _, expr in node.namelist:
        yield _expr("<send> namelist", expr, line, column)
    yield from _params("<send>", node.params, line, column)
    yield from _content("<send>", node.content, line, column)


def _params(owner: str, params: Iterable[ParamNode], line: int, column: int) -> Iterator[_Use]:
    for param in params:
        yield _expr(f"{owner} param {param.name!r}", param.value, line, column)


def _content(owner: str, content: ContentSpec | None, line: int, column: int) -> Iterator[_Use]:
    if content is not None and content.expr is not None:
        yield _expr(f"{owner} content expr", content.expr, line, column)


def _expr(what: str, expr: Any, line: int, column: int) -> _Use:
    return _Use(what, expr.source, getattr(expr, "names_read", None), None, line, column)


def _location(what: str, location: Any, line: int, column: int) -> _Use:
    reads = getattr(location, "names_read", None)
    return _Use(what, location.source, reads, location.root, line, column)


def _script(script: Any, line: int, column: int) -> _Use:
    # A name the script itself assigns before reading it is defined chart-wide already.
    source = script.source.strip().splitlines()[0] if script.source.strip() else ""
    return _Use("<script>", source, getattr(script, "names_read", None), None, line, column)


# -- unreachable states -----------------------------------------------------------------


def reachable_states(machine: Machine) -> frozenset[int]:
    """Indexes of the states some run could enter (an over-approximation, never under)."""
    states = machine.states
    transitions = machine.transitions
    seen: set[int] = set()
    pending = [0]
    while pending:
        index = pending.pop()
        if index in seen:
            continue
        seen.add(index)
        state = states[index]
        pending.extend(state.ancestors)
        if state.kind == "parallel":
            pending.extend(state.children)
        if state.initial_transition is not None:
            pending.extend(transitions[state.initial_transition].targets)
        if state.kind == "history":
            # Whatever the history restores was active before, so reachable by other means.
            continue
        for t in state.transitions:
            pending.extend(transitions[t].targets)
    return frozenset(seen)


def _unreachable_states(machine: Machine) -> Iterator[Diagnostic]:
    reachable = reachable_states(machine)
    for state in machine.states:
        if state.index in reachable or state.parent not in reachable:
            continue
        if state.kind == "history":
            what = f"history state {_name(state)} is never the target of a transition"
        else:
            what = (
                f"state {_name(state)} can never be entered: no transition, initial or "
                "history default leads to it"
            )
        yield Diagnostic("unreachable-state", what, state.line, state.column, "warning")


def _name(state: StateNode) -> str:
    return repr(state.id) if state.named else f"<{state.kind}> (line {state.line})"


# -- dead transitions -------------------------------------------------------------------


def _dead_transitions(machine: Machine) -> Iterator[Diagnostic]:
    reachable = reachable_states(machine)
    transitions = machine.transitions
    for state in machine.states:
        if state.index not in reachable or state.kind == "history":
            continue
        own = [transitions[t] for t in state.transitions]
        always_leaves = next((t for t in own if not t.events and t.cond is None), None)
        earlier = _Unconditional(own)
        for transition in own:
            reason = earlier.shadowing(transition)
            if reason is None and always_leaves is not None and transition.events:
                reason = (
                    f"state {_name(state)} always leaves at once through the unconditional "
                    f"eventless transition on line {always_leaves.line}"
                )
            if reason is not None:
                yield Diagnostic(
                    "dead-transition",
                    f"transition {_describe(transition)} can never be taken: {reason}",
                    transition.line,
                    transition.column,
                    "warning",
                )
            earlier.add(transition)


class _Unconditional:
    """The unconditional transitions of a state seen so far, in order, indexed by their
    event descriptors: whether one always wins over the next transition is a lookup,
    not a comparison with each (a state of thousands of transitions)."""

    __slots__ = ("_eventless", "_index", "_own", "_seen", "_starred")

    def __init__(self, own: list[TransitionNode]) -> None:
        self._own = own
        self._seen = 0
        self._eventless: TransitionNode | None = None
        self._index = DescriptorIndex()
        self._starred: set[int] = set()

    def add(self, transition: TransitionNode) -> None:
        """Take ``transition``, the next of the state's, as seen."""
        position = self._seen
        self._seen += 1
        if transition.cond is not None:
            return
        if not transition.events:
            if self._eventless is None:
                self._eventless = transition
            return
        self._index.add(position, transition.events)
        if any(d in ("*", ".*") for d in transition.events):
            self._starred.add(position)

    def shadowing(self, transition: TransitionNode) -> str | None:
        """Why an unconditional transition seen so far always wins over ``transition``
        (the first that does), or None."""
        if not transition.events:
            first = self._eventless
            if first is None:
                return None
            return f"the unconditional eventless transition on line {first.line} comes first"
        winners: frozenset[int] | None = None
        for descriptor in transition.events:
            # Every event ``descriptor`` matches is matched by the winners' descriptors.
            if descriptor in ("*", ".*"):
                covering = frozenset(self._starred)
            else:
                stem = descriptor[:-2] if descriptor.endswith(".*") else descriptor.rstrip(".")
                covering = self._index.matching(stem)
            winners = covering if winners is None else winners & covering
            if not winners:
                return None
        assert winners is not None  # noqa: S101 - a transition with events has a descriptor
        other = self._own[min(winners)]
        spelled = " ".join(other.events)
        return f"the unconditional transition on line {other.line} ({spelled!r}) comes first"


def _describe(transition: TransitionNode) -> str:
    return f"on {' '.join(transition.events)!r}" if transition.events else "(eventless)"


# -- events from outside ----------------------------------------------------------------


def raised_events(machine: Machine) -> tuple[frozenset[str], bool]:
    """Event names the chart (or the processor, for it) can put in its own queues.

    The flag says whether some event name is only known at run time (an ``eventexpr``).
    """
    names: set[str] = set(PLATFORM_ERRORS)
    dynamic = False
    for node in machine.content:
        if isinstance(node, RaiseNode) and node.event:
            names.add(node.event)
        elif isinstance(node, SendNode):
            if node.event is not None:
                names.add(node.event)
            elif node.eventexpr is not None:
                dynamic = True
    for state in machine.states:
        if state.kind in ("state", "parallel") and state.children:
            names.add(f"done.state.{state.id}")
        for invoke in state.invokes:
            if invoke.id:
                names.add(f"done.invoke.{invoke.id}")
                names.add(f"error.communication.invoke.{invoke.id}")
            else:
                names.add("done.invoke")
    return frozenset(names), dynamic


_SCXML_TYPES = (None, "scxml", "http://www.w3.org/TR/scxml/#SCXMLEventProcessor")


def _self_sent(machine: Machine) -> Iterator[tuple[str, ContentNode]]:
    """Every event name a ``<raise>``, or a ``<send>`` to the chart itself, spells out."""
    for node in machine.content:
        if isinstance(node, RaiseNode | SendNode) and _to_itself(node) and node.event:
            yield node.event, node


def _to_itself(node: RaiseNode | SendNode) -> bool:
    if isinstance(node, RaiseNode):
        return True
    return (
        node.targetexpr is None
        and node.target in (None, "#_internal")
        and node.typeexpr is None
        and node.type in _SCXML_TYPES
    )


def _unhandled_events(machine: Machine, hints: _Hints) -> Iterator[Diagnostic]:
    descriptors = tuple(d for transition in machine.transitions for d in transition.events)
    handled = DescriptorIndex([(0, descriptors)])
    reported: set[str] = set()
    for event, node in _self_sent(machine):
        if event in reported or handled.matching(event):
            continue
        reported.add(event)
        how = "raises" if isinstance(node, RaiseNode) else "sends itself"
        yield Diagnostic(
            "unhandled-event",
            f"the chart {how} {event!r} but no transition handles it: the event is dropped"
            + hints.did_you_mean(event, descriptors),
            node.line,
            node.column,
            "warning",
        )


def _waited_events(machine: Machine) -> dict[str, TransitionNode]:
    """Each event descriptor a transition of a reachable state waits for, first use kept."""
    reachable = reachable_states(machine)
    waited: dict[str, TransitionNode] = {}
    for transition in machine.transitions:
        if transition.source not in reachable:
            continue
        for descriptor in transition.events:
            waited.setdefault(descriptor, transition)
    return waited


def _external_events(machine: Machine, hints: _Hints) -> Iterator[Diagnostic]:
    raised, _ = raised_events(machine)
    waited = _waited_events(machine)
    matched = _raised_descriptors(list(waited), raised)
    spellings = NearSpellings(raised)
    for descriptor, transition in waited.items():
        if descriptor in ("*", ".*") or descriptor in matched:
            continue
        near = [] if descriptor.endswith("*") else spellings.of(descriptor)
        if near:
            yield Diagnostic(
                "misspelled-event",
                f"nothing in the chart raises or sends {descriptor!r}, but it sends "
                f"{near[0]!r}, one edit away: a typo?",
                transition.line,
                transition.column,
                "warning",
            )
            continue
        others = _Others(raised, waited, descriptor)
        yield Diagnostic(
            "external-event",
            f"nothing in the chart raises or sends {descriptor!r}: it must come from outside"
            + hints.did_you_mean(descriptor, others),
            transition.line,
            transition.column,
            "info",
        )


def _raised_descriptors(descriptors: list[str], raised: frozenset[str]) -> set[str]:
    """The ``descriptors`` some name in ``raised`` matches: each name looked up in an index
    of the descriptors, not compared with each. "done.invoke" stands for every invocation
    whose id is only known at run time."""
    index = DescriptorIndex((n, (d,)) for n, d in enumerate(descriptors))
    matched = {descriptors[n] for name in raised for n in index.matching(name)}
    if "done.invoke" in raised:
        for descriptor in descriptors:
            stem = descriptor[:-2] if descriptor.endswith(".*") else descriptor.rstrip(".")
            if stem.startswith(("done.invoke.", "error.communication.invoke.")):
                matched.add(descriptor)
    return matched


class _Others(Collection[str]):
    """The names a waited ``descriptor`` may be a misspelling of: the raised names and
    the other waited descriptors, listed only when a hint reads them (its size first)."""

    __slots__ = ("_descriptor", "_raised", "_waited")

    def __init__(self, raised: frozenset[str], waited: Collection[str], descriptor: str) -> None:
        self._raised = raised
        self._waited = waited
        self._descriptor = descriptor

    def __len__(self) -> int:
        return len(self._raised) + len(self._waited) - 1

    def __iter__(self) -> Iterator[str]:
        yield from self._raised
        yield from (d for d in self._waited if d != self._descriptor)

    def __contains__(self, name: object) -> bool:
        return name in self._raised or (name != self._descriptor and name in self._waited)
