"""Tests of script execution."""

from __future__ import annotations

from typing import Any

import pytest
from statifier.datamodel import (
    EvaluationError,
    ExpressionSyntaxError,
    ScriptError,
    compile_script,
)


def _never_in(state: str) -> bool:
    return False


def _all_writable(name: str) -> bool:
    return True


def run(source: str, env: dict[str, Any], writable: Any = _all_writable) -> list[Any]:
    return compile_script(source).run(env, _never_in, writable)


def test_assignment_is_visible_to_later_statements() -> None:
    env: dict[str, Any] = {"a": 1, "b": 0}
    writes = run("a = a + 1\nb = a * 10", env)
    assert env == {"a": 2, "b": 20}
    assert [(w.root, w.root_value, w.prior) for w in writes] == [("a", 2, 1), ("b", 20, 0)]


def test_indented_script_and_semicolons() -> None:
    env: dict[str, Any] = {"a": 0}
    run("\n    a = 1; a = a + 1\n    pass\n", env)
    assert env["a"] == 2


def test_nested_writes_copy_paths() -> None:
    original = {"items": [1, 2]}
    env: dict[str, Any] = {"cart": original}
    writes = run("cart['items'][0] = 5\ncart.total = 7", env)
    assert env["cart"] == {"items": [5, 2], "total": 7}
    assert original == {"items": [1, 2]}
    assert [w.path for w in writes] == [("items", 0), ("total",)]


def test_multiple_targets() -> None:
    env: dict[str, Any] = {"a": 0, "b": 0}
    writes = run("a = b = [1]", env)
    assert env == {"a": [1], "b": [1]}
    assert len(writes) == 2


def test_new_name_when_writable() -> None:
    env: dict[str, Any] = {}
    writes = run("fresh = 3", env)
    assert env == {"fresh": 3}
    assert writes[0].prior is None


def test_write_refused_when_not_writable() -> None:
    env: dict[str, Any] = {"_sessionid": "s", "x": 1}
    with pytest.raises(ScriptError) as caught:
        run("x = 2\n_sessionid = 'hacked'", env, lambda name: not name.startswith("_"))
    assert env == {"_sessionid": "s", "x": 2}
    assert isinstance(caught.value, EvaluationError)
    assert caught.value.line == 2
    assert [w.root for w in caught.value.writes] == ["x"]


def test_new_name_refused_when_not_writable() -> None:
    env: dict[str, Any] = {}
    with pytest.raises(ScriptError):
        run("fresh = 3", env, lambda name: False)
    assert env == {}


def test_partial_writes_are_kept_on_error() -> None:
    env: dict[str, Any] = {"a": 0, "b": 0}
    with pytest.raises(ScriptError) as caught:
        run("a = 1\nb = 2\nc = 1 / 0\nb = 3", env)
    assert env == {"a": 1, "b": 2}
    assert [(w.root, w.root_value) for w in caught.value.writes] == [("a", 1), ("b", 2)]
    assert caught.value.line == 3
    assert "division by zero" in str(caught.value)


def test_augmented_assignment() -> None:
    env: dict[str, Any] = {"n": 1, "d": {"count": 2}, "L": [1], "s": "a"}
    writes = run("n += 2\nd['count'] *= 5\nL += [2]\ns += 'b'\nn -= 1", env)
    assert env == {"n": 2, "d": {"count": 10}, "L": [1, 2], "s": "ab"}
    assert writes[1].prior == 2
    assert writes[1].path == ("count",)


def test_augmented_assignment_does_not_mutate_shared_list() -> None:
    shared = [1]
    env: dict[str, Any] = {"L": shared}
    run("L += [2]", env)
    assert shared == [1]
    assert env["L"] == [1, 2]


def test_augmented_assignment_on_missing_name_fails() -> None:
    with pytest.raises(ScriptError, match="not defined"):
        run("missing += 1", {})


def test_expression_statements_are_evaluated() -> None:
    with pytest.raises(ScriptError):
        run("1 / 0", {})
    env: dict[str, Any] = {"a": 1}
    assert run("a + 1", env) == []
    assert env == {"a": 1}


def test_missing_root_for_nested_write() -> None:
    with pytest.raises(ScriptError, match="not defined"):
        run("nope.x = 1", {})


def test_disallowed_statements() -> None:
    for source in [
        "import os",
        "from os import path",
        "def f(): pass",
        "class A: pass",
        "for i in L: pass",
        "while True: pass",
        "with x: pass",
        "try:\n  pass\nexcept Exception:\n  pass",
        "global x",
        "del x",
        "return 1",
        "a, b = 1, 2",
        "x: int = 1",
        "if x: y = 1",
        "raise ValueError",
        "assert x",
        "lambda: 0",
        "x @= y",
    ]:
        with pytest.raises(ExpressionSyntaxError):
            compile_script(source)


def test_script_syntax_error_position_accounts_for_indentation() -> None:
    with pytest.raises(ExpressionSyntaxError) as caught:
        compile_script("\n    x = 1\n    import os\n")
    assert (caught.value.line, caught.value.column) == (3, 4)


def test_script_is_reusable() -> None:
    script = compile_script("n = n + 1")
    env: dict[str, Any] = {"n": 0}
    for _ in range(3):
        script.run(env, _never_in, _all_writable)
    assert env["n"] == 3
