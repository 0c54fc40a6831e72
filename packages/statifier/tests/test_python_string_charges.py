"""String operations of the Python datamodel charge the characters they read and write.

Before, searches (``find``, ``count``, ``in``, ``split``), ``strip``, ``startswith`` and
``endswith``, comparisons of two strings, dict lookups by long keys, f-strings and
``int()`` / ``float()`` of strings charged nothing for the length of their strings, so
one macrostep could spend minutes within its step budget (``a.count('b')`` on a million
characters 150,000 times: 66 s on 1.65 of the 10 million steps). Each test counts the
steps charged, never time.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import statifier
from statifier.budget import Budget, MacrostepLimits
from statifier.core import effects as fx
from statifier.datamodel import EvaluationError, compile_expression
from statifier.datamodel.python.context import EvalContext
from statifier.datamodel.python.operators import COMPARE_OPERATORS
from statifier.datamodel.python.sizing import search_cost

N = 100_000
"""Length of the long texts: reading one at 64 characters a unit costs 1,562 units."""

READ = N // 64

TEXTS: dict[str, Any] = {
    "a": "a" * N,
    "c": "a" * (N - 1) + "b",  # differs from ``a`` only in its last character
    "digits": "7" * N,
    "d": {"a" * N: 1},
    "chars": "a" * 100,
}


def _nowhere(state_id: str) -> bool:
    return False


def _charged(source: str, **variables: Any) -> int:
    """Steps one evaluation of ``source`` charges a macrostep's budget, failed or not."""
    budget = Budget(MacrostepLimits())
    before = budget.steps
    with contextlib.suppress(EvaluationError):
        compile_expression(source).evaluate({**TEXTS, **variables}, _nowhere, budget)
    return before - budget.steps


@pytest.mark.parametrize(
    "source",
    [
        "a.find('b')",
        "a.count('b')",
        "a.find('b', 0, len(a))",
        "'b' in a",
        "'b' not in a",
        "a.split('b')",
        "a.split()",
        "a.strip()",
        "a.strip('ab')",
        "a.lstrip('a')",
        "a.rstrip('ab')",
        "a.startswith(c)",
        "a.endswith(c)",
        "a.startswith([c])",
        "a == c",
        "a != c",
        "a < c",
        "a >= c",
        "a in d",
        "d.get(a)",
        "d[a]",
        "float(digits)",
    ],
)
def test_each_string_operation_charges_the_text_it_reads(source: str) -> None:
    charged = _charged(source)
    assert charged >= READ
    # The charge follows the length: a text 10 times shorter costs about 10 times less.
    short = {name: value[: N // 10] for name, value in TEXTS.items() if name != "d"}
    assert _charged(source, d={short["a"]: 1}, **short) <= charged // 8


def test_searches_for_a_long_needle_charge_its_worst_case() -> None:
    # CPython compares a long needle in full at each of the last ~2,000 positions of a text
    # (all of them in a text under 2,500 characters): a needle of 98,000 characters in
    # 100,000 took 70 ms for one ``find`` (and 0.8 s at a million characters), charged 0.
    text = "a" * N
    needle = "a" * 49_000 + "b" + "a" * 48_999
    for source in ("t.find(p)", "t.count(p)", "p in t", "t.split(p)", "t.replace(p, 'x')"):
        with pytest.raises(EvaluationError, match="step budget exceeded"):
            compile_expression(source).evaluate({"t": text, "p": needle}, _nowhere)
    short, half = "a" * 2_400, "a" * 600 + "b" + "a" * 599
    naive = (len(short) - len(half) + 1) * len(half)  # character comparisons, at worst
    for source in ("t.find(p)", "t.count(p)", "p in t", "t.split(p)", "t.replace(p, 'x')"):
        assert _charged(source, t=short, p=half) >= naive // 64


def test_strip_charges_the_text_times_the_characters_it_may_strip() -> None:
    # ``a.strip(chars)`` looks every character it strips up in ``chars``: 250,000 characters
    # stripped by a long ``chars`` took 35 s, charged 0.
    assert _charged("a.strip(chars)") >= N * 100 // 64
    assert _charged("a.rstrip(chars + 'b')") >= N * 101 // 64


def test_each_alternative_of_startswith_is_charged_its_comparison() -> None:
    # ``a.startswith([b] * 999000)`` compared 999,000 times a million characters (27 s);
    # only building the list was charged.
    alternatives = 50
    charged = _charged(f"a.startswith([c] * {alternatives})")
    assert charged >= alternatives * READ
    assert _charged(f"a.endswith([c] * {alternatives}, 0, 6400)") < alternatives * 200


def test_comparisons_charge_long_strings_and_short_ones_nothing() -> None:
    long_literal = "x" * 6_400
    assert _charged(f"a == '{long_literal}'") >= 100
    assert _charged(f"'{long_literal}' < a") >= 100
    assert _charged(f"[0 for i in range(10) if a > '{long_literal}']") >= 1_000
    # Conditions on short strings cost what they did: nothing.
    for source in ("s == 'idle'", "s != t", "s < t", "'idle' == s", "s == t == s"):
        assert _charged(source, s="idle", t="busy") == 0
    assert _charged("s == t", s="a" * 63, t="a" * 63) == 0


def test_literal_shortcuts_charge_what_the_general_operator_charges() -> None:
    for literal in ("x" * 63, "x" * 64, "x" * 6_400):
        for symbol, op in (("==", "Eq"), ("!=", "NotEq"), ("<", "Lt"), (">=", "GtE")):
            general = next(f for t, f in COMPARE_OPERATORS.items() if t.__name__ == op)
            context = EvalContext({}, _nowhere, 0)
            general(context, TEXTS["a"], literal)
            expected = 1_000_000 - context.steps
            assert _charged(f"a {symbol} '{literal}'") == expected
            assert expected == (0 if len(literal) < 64 else len(literal) // 64)


def test_fstrings_charge_the_strings_they_copy() -> None:
    assert _charged("f'{a}!'") >= N
    assert _charged("[f'{a}{a}' for i in range(3)]") >= 6 * N


def test_int_of_a_string_charges_the_quadratic_parse() -> None:
    digits = "7" * 4_000
    assert _charged("int(s)", s=digits) >= 4_000 * 4_000 // 8_192
    assert _charged("int(digits)") >= READ


def test_search_cost_is_linear_in_the_text_for_short_needles() -> None:
    assert search_cost(N, 1) == READ + 1
    assert search_cost(N, 64) == N + 1
    assert search_cost(10, 11) == 1
    assert search_cost(N, 1_000) == (N * 64 + 2_500 * 1_000) // 64 + 1


def test_a_macrostep_of_long_searches_runs_out_of_steps() -> None:
    # The audit's chart, scaled down: ten evaluations of 100 ``count`` calls over 200,000
    # characters charged about 11,000 steps in all; now each call charges 3,126.
    text = "a" * 200_000
    machine = statifier.compile(
        '<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" initial="s">'
        f'<datamodel><data id="a" expr="\'a\' * {len(text)}"/><data id="n" expr="0"/>'
        '</datamodel><state id="s"><onentry><foreach array="list(range(10))" item="k">'
        '<assign location="n" expr="n + len([0 for i in range(100) if a.count(\'b\')])"/>'
        "</foreach></onentry></state></scxml>"
    )
    limits = MacrostepLimits(steps=1_000_000)
    state, effects = statifier.initialize(machine, session_id="s", limits=limits)
    (exhausted,) = [e for e in effects if isinstance(e, fx.BudgetExhausted)]
    assert exhausted.reason == "steps"
    assert state.datamodel["n"] == 0
