"""The builder's types catch misuse before a chart is ever compiled.

Each line of ``MISUSE`` is a mistake an editor and ``mypy --strict`` must report, with the
error code given after it; ``CORRECT`` uses every builder the documented way and must
type-check clean. mypy runs once, in this process, on the two files written for the test.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mypy import api

MISUSE = """\
from statifier import build as sc

sc.chart(sc.transition(target="a"))  # arg-type: a transition outside any state
sc.on_entry(sc.transition(target="a"))  # arg-type: a transition is not an action
sc.final("f", sc.transition(target="a"))  # arg-type: a final has no transitions
sc.parallel("p", sc.initial(sc.transition(target="a")))  # arg-type: no initial in a parallel
sc.history("h", sc.raise_("e"))  # arg-type: a history holds its default transition
sc.transition(event="go", type="sideways")  # arg-type: internal or external
sc.history("h", type="deeper")  # arg-type: shallow or deep
sc.chart(sc.state("s"), datamodel="javascript")  # arg-type: python, ecmascript or null
sc.chart(sc.state("s"), binding="lazy")  # arg-type: early or late
sc.send(sc.finalize(), event="e")  # arg-type: params or content only
sc.invoke(sc.raise_("e"), type="scxml")  # arg-type: params, content or finalize
sc.done_data(sc.log(expr="1"))  # arg-type: params or content
sc.log("x")  # call-arg: keyword-only
sc.transition("go")  # arg-type: the event is a keyword
sc.cancel()  # call-overload: sendid or sendidexpr
sc.cancel("hold", sendidexpr="x")  # call-overload: not both
sc.param("p")  # call-overload: expr or location
sc.param("p", expr="1", location="x")  # call-overload: not both
sc.data("d", expr="1", src="d.json")  # call-overload: one source of a value
sc.data("d", value={1, 2})  # call-overload: a set is not JSON-like
sc.assign("x")  # call-overload: a value to assign
sc.content(expr="1", value=2)  # call-overload: one way to give content
sc.script("x = 1", src="x.py")  # call-overload: a body or a src
sc.state("s", initial=3)  # arg-type: state ids are text
sc.foreach(sc.log(expr="i"), array="items")  # call-arg: item is required
sc.if_("x", sc.state("s"))  # arg-type: actions only
sc.if_("x").elseif("y", sc.final("f"))  # arg-type: actions only
sc.call("f", 1)  # arg-type: arguments are expressions
"""

CORRECT = """\
from datetime import timedelta

from statifier import build as sc

CHART = sc.chart(
    sc.data("n", expr="0"),
    sc.data("items", value=[1, {"k": None}]),
    sc.data("doc", markup=sc.xml("<a/>")),
    sc.data("remote", src="doc.json"),
    sc.script("x = 1"),
    sc.state(
        "s",
        sc.data("local"),
        sc.initial(sc.transition(sc.log(expr="1"), target="t")),
        sc.history("h", sc.transition(target="t"), type="deep"),
        sc.on_entry(
            sc.raise_("e"),
            sc.assign("n", expr=sc.call("f", "n", k="1")),
            sc.assign("n", value=2),
            sc.if_("n > 1", sc.log(label="l")).elseif("n", sc.cancel("x")).else_(),
            sc.foreach(sc.script(src="s.py"), array="items", item="i", index="j"),
            sc.send(sc.param("a", location="n"), event="e", delay=timedelta(seconds=1)),
            sc.send(sc.content(value=None), event="e", namelist=["n"], delay="1s"),
            sc.cancel(sendidexpr="'x'"),
        ),
        sc.on_exit(),
        sc.invoke(
            sc.content(chart=sc.chart(sc.final("c"))),
            sc.finalize(sc.assign("n", expr="1")),
            type="scxml",
            autoforward=True,
        ),
        sc.transition(event=["a", "b.*"], cond="n", target=("t", "u"), type="internal"),
        sc.state("t"),
        sc.parallel("p", sc.state("u"), sc.history("ph")),
        initial="t",
    ),
    sc.final("f", sc.on_entry(), sc.done_data(sc.param("n", expr="n"))),
    name="typed",
    initial="s",
    datamodel="python",
    binding="late",
)
"""

_ERROR = re.compile(r"^([^:]+):(\d+): error: .*\[([a-z-]+)\]$")


@pytest.fixture(scope="module")
def mypy_errors(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[tuple[int, str]]]:
    """(line, code) of every error ``mypy --strict`` reports, by file (``misuse``,
    ``correct``): both files in one run, which analyses the library once for the two."""
    folder = tmp_path_factory.mktemp("typing")
    paths = {name: folder / f"{name}.py" for name in ("misuse", "correct")}
    for name, source in (("misuse", MISUSE), ("correct", CORRECT)):
        paths[name].write_text(source, encoding="utf-8")
    argv = ["--strict", "--no-incremental", "--no-error-summary", *map(str, paths.values())]
    out, err, _ = api.run(argv)
    assert not err, err
    found: dict[str, set[tuple[int, str]]] = {name: set() for name in paths}
    for match in filter(None, map(_ERROR.match, out.splitlines())):
        found[Path(match.group(1)).stem].add((int(match.group(2)), match.group(3)))
    assert sum(map(len, found.values())) == sum(" error: " in line for line in out.splitlines())
    return found


@pytest.mark.timeout(180)
def test_misuse_of_the_builder_is_a_type_error(
    mypy_errors: dict[str, set[tuple[int, str]]],
) -> None:
    expected = {
        (number, line.split("# ")[1].split(":")[0])
        for number, line in enumerate(MISUSE.splitlines(), 1)
        if "# " in line
    }
    assert mypy_errors["misuse"] == expected


@pytest.mark.timeout(180)
def test_the_documented_uses_type_check_clean(
    mypy_errors: dict[str, set[tuple[int, str]]],
) -> None:
    assert mypy_errors["correct"] == set()
    namespace: dict[str, object] = {}
    exec(compile(CORRECT, "correct.py", "exec"), namespace)  # noqa: S102 - the test's own code
    assert type(namespace["CHART"]).__name__ == "Chart"
