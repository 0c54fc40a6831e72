"""Security tests: hostile expressions must be refused quickly with the right error type."""

from __future__ import annotations

import time
from typing import Any

import pytest
from statifier.datamodel import (
    EvaluationError,
    ExpressionSyntaxError,
    compile_expression,
    compile_script,
)

TIME_LIMIT = 0.5


def _never_in(state: str) -> bool:
    return False


def refused_at_compile(source: str) -> ExpressionSyntaxError:
    started = time.perf_counter()
    with pytest.raises(ExpressionSyntaxError) as caught:
        compile_expression(source)
    assert time.perf_counter() - started < TIME_LIMIT
    return caught.value


def refused_at_run(source: str, **variables: Any) -> EvaluationError:
    expression = compile_expression(source)
    started = time.perf_counter()
    with pytest.raises(EvaluationError) as caught:
        expression.evaluate(variables, _never_in)
    assert time.perf_counter() - started < TIME_LIMIT
    return caught.value


def test_dunder_import() -> None:
    refused_at_compile("__import__('os')")


def test_class_bases_walk() -> None:
    refused_at_compile("().__class__.__bases__")


def test_dunder_attribute() -> None:
    refused_at_compile("x.__class__")


def test_dunder_name() -> None:
    refused_at_compile("__builtins__")


def test_getattr() -> None:
    refused_at_compile("getattr(x, 'y')")


def test_eval() -> None:
    refused_at_compile("eval('1')")


def test_exec() -> None:
    refused_at_compile("exec('1')")


def test_open() -> None:
    refused_at_compile("open('/etc/passwd')")


def test_isinstance_and_type_are_not_functions() -> None:
    refused_at_compile("isinstance(x, int)")
    refused_at_compile("type(x)")


def test_lambda() -> None:
    refused_at_compile("(lambda: 1)()")


def test_walrus() -> None:
    refused_at_compile("(y := 1)")


def test_mutating_method() -> None:
    refused_at_compile("[].append(1)")


def test_mutating_method_on_variable() -> None:
    refused_at_compile("d.update({'a': 1})")
    refused_at_compile("d.pop('a')")


def test_format_method() -> None:
    refused_at_compile("'{0.__class__}'.format(x)")


def test_dunder_method_call() -> None:
    refused_at_compile("'a'.__len__()")


def test_private_attribute() -> None:
    refused_at_compile("_event._private")


def test_calling_a_non_name() -> None:
    refused_at_compile("x[0]()")


def test_starred_and_yield_and_await() -> None:
    refused_at_compile("[*x]")
    refused_at_compile("(yield 1)")
    refused_at_compile("await x")


def test_huge_power_tower() -> None:
    refused_at_run("10**10**10")


def test_huge_power() -> None:
    refused_at_run("2**100000")


def test_power_with_large_result() -> None:
    refused_at_run("7 ** 9999")


def test_float_power_overflow() -> None:
    refused_at_run("10.0 ** 400")


def test_string_repeat() -> None:
    refused_at_run("'a' * 10**9")


def test_list_repeat() -> None:
    refused_at_run("[0] * 10**9")


def test_concatenation_of_large_strings() -> None:
    refused_at_run("'x' * 10**6 + 'y' * 10**6")


def test_sum_of_huge_range() -> None:
    refused_at_run("sum(range(10**12))")


def test_huge_shift() -> None:
    refused_at_run("1 << 10**9")


def test_repeated_multiplication_grows_past_limit() -> None:
    refused_at_run("x * x * x * x * x * x * x * x", x=2**600)


def test_deeply_nested_parentheses() -> None:
    refused_at_compile("(" * 500 + "1" + ")" * 500)


def test_deeply_nested_unary_operators() -> None:
    refused_at_compile("-" * 5000 + "1")


def test_deeply_nested_lists() -> None:
    refused_at_compile("[" * 100 + "]" * 100)


def test_long_operator_chain() -> None:
    refused_at_compile(" + ".join(["1"] * 200))


def test_very_long_expression() -> None:
    error = refused_at_compile("1 + " * 5000)
    assert "too long" in error.message


def test_comprehension_over_huge_range() -> None:
    refused_at_run("[x for x in range(10**9)]")


def test_comprehension_exhausts_step_budget() -> None:
    refused_at_run("[[y for y in L] for x in L]", L=list(range(3000)))


def test_nested_comprehensions_with_big_bodies() -> None:
    refused_at_run("[x and x and x and x and x and x and x for x in range(10**6)]")


def test_printing_a_shared_structure() -> None:
    # Little memory, but 10**12 characters when printed.
    refused_at_run("str(['x' * 10**6] * 10**6)")


def test_fstring_of_a_shared_structure() -> None:
    refused_at_run("f'{L}'", L=["x" * 10**6] * 10**6)


def test_comparing_shared_structures() -> None:
    refused_at_run("['x' * 10**6] * 10**6 == ['x' * 10**6] * 10**6")


def test_membership_in_shared_structure() -> None:
    refused_at_run("('x' * 10**6) in ['x' * (10**6 - 1) + 'y'] * 10**6")


def test_join_result_too_long() -> None:
    refused_at_run("''.join(['x' * 10**6] * 10)")


def test_replace_result_too_long() -> None:
    refused_at_run("('a' * 10**5).replace('a', 'bbbbbbbbbbbbbbbbbbbb')")


def test_int_from_huge_string() -> None:
    refused_at_run("int('9' * 5000)")


def test_round_with_huge_ndigits() -> None:
    refused_at_run("round(5, -10**9)")


def test_dict_keyword_arguments_are_allowed() -> None:
    assert compile_expression("dict(a=1)").evaluate({}, _never_in) == {"a": 1}


def test_division_by_zero() -> None:
    error = refused_at_run("1/0")
    assert "zero" in str(error)


def test_undefined_name() -> None:
    error = refused_at_run("undefined_thing + 1")
    assert "undefined_thing" in str(error)


def test_deeply_nested_value_comparison() -> None:
    nested: Any = 1
    for _ in range(20_000):
        nested = [nested]
    refused_at_run("a == b", a=nested, b=[nested])


def test_deeply_nested_value_to_text() -> None:
    nested: Any = 1
    for _ in range(20_000):
        nested = [nested]
    refused_at_run("str(a)", a=nested)


def test_script_cannot_import() -> None:
    with pytest.raises(ExpressionSyntaxError):
        compile_script("import os\nos.system('true')")


def test_script_budget_is_shared_across_statements() -> None:
    statement = "a = len([x for x in range(10**5)])\n"
    script = compile_script(statement * 30)
    started = time.perf_counter()
    with pytest.raises(EvaluationError):
        script.run({}, _never_in, lambda name: True)
    assert time.perf_counter() - started < 2 * TIME_LIMIT


def test_no_python_exception_escapes() -> None:
    class Hostile(dict[str, Any]):
        def __getitem__(self, key: str) -> Any:
            raise RuntimeError("boom")

    with pytest.raises(EvaluationError):
        compile_expression("x").evaluate(Hostile(), _never_in)


def test_script_with_pathological_indentation_compiles_quickly() -> None:
    source = " " * 40_000 + "x = 1\n" + "\t" * 40_000 + "y = 2\n"
    started = time.perf_counter()
    with pytest.raises(ExpressionSyntaxError):
        compile_script(source)
    assert time.perf_counter() - started < TIME_LIMIT


def test_too_long_script_is_refused() -> None:
    with pytest.raises(ExpressionSyntaxError, match="too long"):
        compile_script("x = 1\n" * 20_000)
