"""Values the compiler computes: send delays, inline data, and the chart identity."""

from __future__ import annotations

import hashlib

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


# -- identity -----------------------------------------------------------------------------

SOURCE = (
    f'<scxml {NS} initial="a">\n'
    '  <datamodel><data id="x" expr="1"/></datamodel>\n'
    '  <state id="a"/>\n'
    "</scxml>\n"
).encode()


def test_identity_is_the_sha256_of_the_source_bytes() -> None:
    machine = statifier.compile(SOURCE)
    assert machine.identity == "sha256:" + hashlib.sha256(SOURCE).hexdigest()
    assert machine.source == SOURCE


def test_identity_of_a_str_source_hashes_its_utf8_encoding() -> None:
    text = f'<scxml {NS}>\n  <state id="caf\u00e9"/>\n</scxml>\n'
    machine = statifier.compile(text)
    assert machine.identity == "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_identity_is_stable_for_the_same_bytes() -> None:
    assert statifier.compile(SOURCE).identity == statifier.compile(bytes(SOURCE)).identity


def test_identity_changes_with_one_changed_byte() -> None:
    reference = statifier.compile(SOURCE).identity
    for position in (SOURCE.index(b'expr="1"') + 6, len(SOURCE) - 1):
        changed = bytearray(SOURCE)
        changed[position] = ord("2") if SOURCE[position] == ord("1") else ord(" ")
        assert sum(a != b for a, b in zip(changed, SOURCE, strict=True)) == 1
        assert statifier.compile(bytes(changed)).identity != reference


def test_identity_includes_name_and_version_when_given() -> None:
    digest = "sha256:" + hashlib.sha256(SOURCE).hexdigest()
    assert statifier.compile(SOURCE, name="orders").identity == f"{digest};name=orders"
    assert statifier.compile(SOURCE, version="7").identity == f"{digest};version=7"
    both = statifier.compile(SOURCE, name="orders", version="7")
    assert both.identity == f"{digest};name=orders;version=7"
    assert (both.name, both.version) == ("orders", "7")


def test_identity_matches_the_public_chart_identity_function() -> None:
    machine = statifier.compile(SOURCE, name="n", version="v")
    assert machine.identity == statifier.chart_identity(SOURCE, "n", "v")


def test_chart_name_attribute_names_the_machine_but_not_the_identity() -> None:
    source = f'<scxml {NS} name="from_chart"><state id="a"/></scxml>'.encode()
    machine = statifier.compile(source)
    assert machine.name == "from_chart"
    assert machine.identity == "sha256:" + hashlib.sha256(source).hexdigest()
    assert statifier.compile(source, name="given").name == "given"
