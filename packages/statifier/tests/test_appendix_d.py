"""The engine against a literal reading of the W3C algorithm (Appendix D).

The core computes exit and entry sets, histories, done events and conflicts with indexes,
plans made once per configuration, memos of selections and replays of steps that only
move the configuration (ADR 20 and its amendment of 2026-12-03);
``engine_support.appendix_d`` computes them as the recommendation's pseudo-code does. On
random charts (``engine_support.trees``) and on hand-written ones at the edges those
shortcuts took, both must log the same labels in the same order (every entry, exit and
piece of transition, ``<initial>`` and history content), end each macrostep in the same
configuration and stop at the same event.
"""

from __future__ import annotations

from typing import Literal

import pytest
import statifier
from hypothesis import given, settings
from hypothesis import strategies as st
from statifier import Event, MachineState, handle_event
from statifier.core import effects as fx

from engine_support.appendix_d import Reference
from engine_support.trees import EXTERNAL_EVENTS, Node, Transition, Tree, trees

Datamodel = Literal["python", "ecmascript"]


def _observe(
    state: MachineState, effects: list[fx.Effect]
) -> tuple[list[str | None], frozenset[str]]:
    unexpected = [e for e in effects if isinstance(e, (fx.ErrorRaised, fx.BudgetExhausted))]
    assert not unexpected, unexpected
    labels = [e.label for e in effects if isinstance(e, fx.Log)]
    states = state.machine.states
    return labels, frozenset(states[index].id for index in state.configuration)


def _agree(
    tree: Tree, events: list[str], datamodel: Datamodel = "python", logs: bool = True
) -> None:
    """Drive ``tree`` through ``events`` in both; every macrostep must agree (without
    ``logs``, in its configuration and whether it runs)."""
    reference = Reference(tree)
    reference.start()  # (``Endless`` would say a chart broke ``trees``' promise)
    expected = [(reference.logs[:], reference.active(), reference.running)]
    for name in events:
        if not reference.running:
            break
        reference.logs.clear()
        reference.send(name)
        expected.append((reference.logs[:], reference.active(), reference.running))

    if not logs:
        expected = [([], active, running) for _, active, running in expected]
    machine = statifier.compile(tree.scxml(datamodel, logs))
    state, effects = statifier.initialize(machine, session_id="appendix-d")
    seen = [(*_observe(state, effects), state.running)]
    for name in events[: len(expected) - 1]:
        state, effects = handle_event(state, Event(name=name))
        seen.append((*_observe(state, effects), state.running))
    for step, (want, got) in enumerate(zip(expected, seen, strict=True)):
        assert got == want, f"macrostep {step} of\n{tree.scxml()}\nevents {events}"


_EVENT_LISTS = st.lists(st.sampled_from(EXTERNAL_EVENTS), min_size=2, max_size=10)


@settings(max_examples=800, deadline=None)
@given(trees(), _EVENT_LISTS)
def test_random_charts_agree_with_the_literal_algorithm(tree: Tree, events: list[str]) -> None:
    _agree(tree, events)


@settings(max_examples=300, deadline=None)
@given(trees(), _EVENT_LISTS)
def test_random_charts_without_logs_agree_with_the_literal_algorithm(
    tree: Tree, events: list[str]
) -> None:
    """The same with no ``<log>``: a macrostep with no effect is replayed from the
    engine's memo the next time it is taken (``core._replay``)."""
    _agree(tree, events, logs=False)


@settings(max_examples=150, deadline=None)
@given(trees(), _EVENT_LISTS)
def test_random_ecmascript_charts_agree_with_the_literal_algorithm(
    tree: Tree, events: list[str]
) -> None:
    """The same under the ECMAScript datamodel: its conditions are evaluated in turn by
    the datamodel and its runs of content go to it whole (ADR 22)."""
    _agree(tree, events, "ecmascript")


# -- the edges the engine's shortcuts took (ADR 20's amendment of 2026-12-03) ------------


def _state(node_id: str, parent: Node, kind: str = "state") -> Node:
    node = Node(node_id, kind, parent)  # type: ignore[arg-type]
    parent.children.append(node)
    if kind != "history":
        node.onentry.append([("log", f"+{node_id}")])
        node.onexit.append([("log", f"-{node_id}")])
    return node


def _wide(regions: int, history: str | None, finals: bool) -> Tree:
    """``out`` and a parallel ``p`` of ``regions`` regions, each ``rN`` holding ``mN``,
    which holds ``aN`` and ``bN`` (a final one when ``finals``): ``go`` moves every region
    from a to b, ``leave`` goes to ``out``, ``back`` returns through ``p``'s history (when
    there is one), whose deep record lies two levels under each region; ``jump`` enters the
    last two regions' b states at once."""
    root = Node("__root", "root", None)
    out = _state("out", root)
    parallel = _state("p", root, "parallel")
    root.initial = ("p",)
    for index in range(regions):
        middle = _state(f"m{index}", _state(f"r{index}", parallel))
        a = _state(f"a{index}", middle)
        _state(f"b{index}", middle, "final" if finals else "state")
        a.transitions.append(
            Transition(source=a, events=("go",), targets=(f"b{index}",), content=[("log", "t")])
        )
    parallel.transitions.append(Transition(source=parallel, events=("leave",), targets=("out",)))
    parallel.transitions.append(
        Transition(source=parallel, events=("done.state.p",), content=[("log", "all final")])
    )
    target = "p"
    if history is not None:
        h = _state("h", parallel, "history")
        h.history_type = history  # type: ignore[assignment]
        h.history_default = Transition(source=h, targets=("r0",), content=[("log", "default")])
        target = "h"
    out.transitions.append(Transition(source=out, events=("back",), targets=(target,)))
    out.transitions.append(
        Transition(source=out, events=("jump",), targets=(f"b{regions - 2}", f"b{regions - 1}"))
    )
    return Tree(root)


@pytest.mark.parametrize("history", [None, "shallow", "deep"])
@pytest.mark.parametrize("finals", [False, True])
def test_a_wide_parallel_agrees(history: str | None, finals: bool) -> None:
    events = ["back", "go", "leave", "back", "leave", "jump", "leave", "back"]
    _agree(_wide(40, history, finals), events)


@pytest.mark.parametrize("kind", ["deep", "shallow"])
@pytest.mark.parametrize("regions", [1, 2])
def test_a_history_targeted_from_inside_its_parallel(kind: str, regions: int) -> None:
    """``go`` from ``s4`` targets the history ``h`` of ``p``, its own parallel ancestor.
    The domain, worked out before the exit records ``h``, is ``s1``: ``p`` is left and
    entered again. Worked out after the exit, with one region, the deep record (``s4``)
    would make it ``s3``, and ``p`` would be left out of the configuration."""
    root = Node("__root", "root", None)
    s1 = _state("s1", root)
    parallel = _state("p", s1, "parallel")
    h = _state("h", parallel, "history")
    h.history_type = kind  # type: ignore[assignment]
    h.history_default = Transition(source=h, targets=("s3",), content=[("log", "default")])
    s4 = _state("s4", _state("s3", parallel))
    if regions == 2:
        _state("x", _state("r2", parallel))
    s4.transitions.append(Transition(source=s4, events=("go",), targets=("h",)))
    _agree(Tree(root), ["go", "go"])


def test_a_step_that_records_history_is_never_replayed() -> None:
    """Leaving ``p`` from ``x`` records ``h`` as ``[x]``. The same step taken again after
    ``p`` was left from ``y`` must record ``[x]`` again, so a replay of the first (which
    moves the configuration only) would bring ``back`` into ``y``."""
    root = Node("__root", "root", None)
    p = _state("p", root)
    h = _state("h", p, "history")
    h.history_default = Transition(source=h, targets=("x",))
    _state("x", p)
    _state("y", p)
    out = _state("out", root)
    p.transitions.append(Transition(source=p, events=("e",), targets=("out",)))
    for event, target in (("tox", "x"), ("toy", "y"), ("back", "h")):
        out.transitions.append(Transition(source=out, events=(event,), targets=(target,)))
    events = ["e", "toy", "e", "tox", "e", "back"]
    _agree(Tree(root), events, logs=False)
    _agree(Tree(root), events)
