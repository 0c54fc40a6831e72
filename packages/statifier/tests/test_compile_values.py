"""Values the compiler computes: send delays and inline data (identity: test_chart_identity)."""

from __future__ import annotations

import pytest
import statifier
from statifier.chart.model import SendNode

NS = 'xmlns="http://www.w3.org/2005/07/scxml"'


def sends(machine: statifier.Machine) -> dict[str, SendNode]:
    """Every ``<send>`` in the chart, by event name."""
    found = {n.event: n for n in machine.content if isinstance(n, SendNode)}
    return {k: v for k, v in found.items() if k is not None}


DELAYS = {
    "7d": 7 * 86_400_000,
    "24h": 86_400_000,
    ".5s": 500,
    "1.5s": 1_500,
    "250ms": 250,
    "2w": 14 * 86_400_000,
    "1m": 60_000,
    "0s": 0,
}


def test_send_delays_are_compiled_to_milliseconds() -> None:
    body = "\n".join(f'      <send event="e{i}" delay="{d}"/>' for i, d in enumerate(DELAYS))
    source = f'<scxml {NS}>\n  <state id="a">\n    <onentry>\n{body}\n'
    source += "    </onentry>\n  </state>\n</scxml>\n"
    by_event = sends(statifier.compile(source))
    got = {delay: by_event[f"e{i}"].delay_ms for i, delay in enumerate(DELAYS)}
    assert got == DELAYS


def test_send_without_delay_has_no_delay_and_delayexpr_is_kept_as_an_expression() -> None:
    source = f"""<scxml {NS}>
      <state id="a">
        <onentry>
          <send event="now"/>
          <send event="later" delayexpr="'1s'"/>
        </onentry>
      </state>
    </scxml>"""
    by_event = sends(statifier.compile(source))
    assert by_event["now"].delay_ms is None
    assert by_event["now"].delayexpr is None
    assert by_event["later"].delay_ms is None
    assert by_event["later"].delayexpr is not None


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("[1, 2, 3]", [1, 2, 3]),
        ('\n   {"a": [1, {"b": null}], "c": true}\n  ', {"a": [1, {"b": None}], "c": True}),
        ("42", 42),
        (" -2.5 ", -2.5),
        ('"quoted"', "quoted"),
        ("hello world", "hello world"),
        ("\n  several   words\n  over lines  \n", "several words over lines"),
    ],
    ids=["list", "object", "int", "float", "json-string", "text", "text-whitespace"],
)
def test_inline_data_content(content: str, expected: object) -> None:
    source = f"""<scxml {NS}>
  <datamodel>
    <data id="x">{content}</data>
  </datamodel>
  <state id="a"/>
</scxml>"""
    (data,) = statifier.compile(source).data
    assert data.id == "x"
    assert data.has_value is True
    assert data.value == expected
    assert type(data.value) is type(expected)


def test_data_with_expr_has_no_static_value() -> None:
    source = f'<scxml {NS}><datamodel><data id="x" expr="1 + 1"/></datamodel><state/></scxml>'
    (data,) = statifier.compile(source).data
    assert data.has_value is False
    assert data.expr is not None
