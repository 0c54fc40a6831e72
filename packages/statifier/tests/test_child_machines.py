"""``compile_child`` keeps the machine a child chart's text compiled to on its parent, so a
state entered again starts its child without compiling it again: bounded, and never for a
chart whose compiling asked the resolver (which may answer differently next time)."""

from __future__ import annotations

import statifier
from statifier.runtime.invoke import CHILD_MACHINES, compile_child

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python"'
PARENT = statifier.compile(f'<scxml {NS}><state id="p"/></scxml>')


def child(n: int) -> str:
    return f'<scxml {NS} name="c{n}"><state id="w{n}"/></scxml>'


def test_one_text_compiles_once_per_parent() -> None:
    parent = statifier.compile(f'<scxml {NS}><state id="p"/></scxml>')
    first = compile_child(child(1), parent, None)
    assert compile_child(child(1), parent, None) is first
    assert compile_child(child(1), parent, lambda src: "") is first  # not asked: the same
    assert compile_child(child(2), parent, None) is not first
    assert compile_child(child(1), PARENT, None) is not first  # another parent's functions


def test_at_most_child_machines_are_kept_the_oldest_let_go_first() -> None:
    parent = statifier.compile(f'<scxml {NS}><state id="p"/></scxml>')
    made = [compile_child(child(n), parent, None) for n in range(CHILD_MACHINES + 1)]
    assert compile_child(child(1), parent, None) is made[1]
    assert compile_child(child(CHILD_MACHINES), parent, None) is made[CHILD_MACHINES]
    assert compile_child(child(0), parent, None) is not made[0]  # the one let go


def test_a_chart_that_asks_the_resolver_compiles_at_every_start() -> None:
    parent = statifier.compile(f'<scxml {NS}><state id="p"/></scxml>')
    answers = iter(["1", "2"])
    asked: list[str] = []

    def resolver(src: str) -> str:
        asked.append(src)
        return next(answers)

    text = f'<scxml {NS}><datamodel><data id="v" src="v.json"/></datamodel><state id="w"/></scxml>'
    first = compile_child(text, parent, resolver)
    second = compile_child(text, parent, resolver)
    assert asked == ["v.json", "v.json"]
    assert first is not second
