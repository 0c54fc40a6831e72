"""Chart identity: a hash of the canonical form, blind to formatting, sensitive to meaning."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

import pytest
import statifier
from statifier.chart.identity import (
    IDENTITY_FORMAT,
    canonical_text,
    chart_identity,
    source_identity,
)
from statifier.core import position

NS = "http://www.w3.org/2005/07/scxml"

CHART = f"""<?xml version="1.0" encoding="UTF-8"?>
<scxml xmlns="{NS}" initial="idle" name="pickup">
  <datamodel>
    <data id="slots">{{"morning": [9, 10],
                      "evening": [18]}}</data>
    <data id="note">Bring the   receipt</data>
    <data id="count" expr="0"/>
  </datamodel>
  <state id="idle">
    <transition event="order" cond="count &lt; 3" target="waiting">
      <assign location="count" expr="count + 1"/>
    </transition>
  </state>
  <state id="waiting">
    <onentry>
      <send id="expiry" event="pickup.expired" delay="2d"/>
      <script>
        total = count * 2
        label = 'x'
      </script>
    </onentry>
    <onexit><cancel sendid="expiry"/></onexit>
    <transition event="pickup.expired" target="idle"/>
    <transition event="picked" target="done"/>
  </state>
  <final id="done"/>
</scxml>
"""


def identity(source: str | bytes) -> str:
    """The compiled machine's identity (and it agrees with ``chart_identity``)."""
    compiled = statifier.compile(source).identity
    assert compiled == chart_identity(source)
    return compiled


def reindent(source: str, width: int) -> str:
    """Every line's leading spaces multiplied by ``width`` (a uniform re-indentation)."""
    return re.sub(r"(?m)^( +)", lambda m: " " * (len(m.group(1)) * width), source)


# -- the identity string ---------------------------------------------------------------------


def test_the_identity_names_its_rule_and_hashes_the_canonical_form() -> None:
    machine = statifier.compile(CHART)
    digest = hashlib.sha256(canonical_text(CHART).encode("utf-8")).hexdigest()
    assert machine.identity == f"{IDENTITY_FORMAT}:sha256:{digest}"
    assert re.fullmatch(r"scxml-c1:sha256:[0-9a-f]{64}", machine.identity)


def test_name_and_version_given_at_compile_time_suffix_the_identity() -> None:
    base = statifier.compile(CHART).identity
    assert statifier.compile(CHART, name="orders").identity == f"{base};name=orders"
    assert statifier.compile(CHART, version="7").identity == f"{base};version=7"
    both = statifier.compile(CHART, name="orders", version="7")
    assert both.identity == f"{base};name=orders;version=7"
    assert both.identity == chart_identity(CHART, "orders", "7")


def test_the_chart_name_attribute_names_the_machine_but_not_the_identity() -> None:
    machine = statifier.compile(CHART)
    assert machine.name == "pickup"
    assert ";name=" not in machine.identity


def test_the_machine_keeps_the_identity_of_its_source_bytes() -> None:
    raw = CHART.encode("utf-8")
    machine = statifier.compile(raw, name="n", version="v")
    assert machine.source == raw
    expected = "sha256:" + hashlib.sha256(raw).hexdigest() + ";name=n;version=v"
    assert machine.source_identity == expected == source_identity(raw, "n", "v")


def test_the_canonical_form_is_readable_text() -> None:
    text = canonical_text(CHART)
    assert f'element "{NS}" "transition"' in text
    assert 'attribute null "cond" "count < 3"' in text
    assert 'value {"morning":[9,10],"evening":[18]}' in text
    assert 'value "Bring the receipt"' in text
    assert "script \"total = count * 2\\nlabel = 'x'\\n\"" in text


# -- formatting does not change it -----------------------------------------------------------

COSMETIC: dict[str, Callable[[str], str | bytes]] = {
    "comments and a processing instruction": lambda s: s.replace(
        "<state id=", "<!-- a state --><?tool hint?>\n  <state id="
    ).replace("<final", "<!--\n multi\n line -->\n  <final"),
    "CRLF line endings": lambda s: s.replace("\n", "\r\n"),
    "re-indentation": lambda s: reindent(s, 3),
    "tabs for indentation": lambda s: re.sub(r"(?m)^( +)", lambda m: "\t" * len(m.group(1)), s),
    "no whitespace between elements": lambda s: re.sub(r">\s+<", "><", s),
    "attribute order": lambda s: s.replace(
        'event="order" cond="count &lt; 3" target="waiting"',
        'target="waiting" cond="count &lt; 3" event="order"',
    ).replace(
        'id="expiry" event="pickup.expired" delay="2d"',
        'delay="2d" id="expiry" event="pickup.expired"',
    ),
    "quoting and escapes": lambda s: s.replace('cond="count &lt; 3"', "cond='count &#60; 3'"),
    "a namespace prefix": lambda s: re.sub(r"<(/?)(?=[a-z])", r"<\1sc:", s).replace(
        f'xmlns="{NS}"', f'xmlns:sc="{NS}"'
    ),
    "no XML declaration": lambda s: s.split("\n", 1)[1],
    "UTF-16 encoding": lambda s: s.replace('encoding="UTF-8"', 'encoding="UTF-16"').encode(
        "utf-16"
    ),
    "CDATA for a script": lambda s: s.replace(
        "        total = count * 2\n        label = 'x'\n",
        "<![CDATA[\n        total = count * 2\n        label = 'x'\n]]>",
    ),
    "reformatted JSON data": lambda s: s.replace(
        '{"morning": [9, 10],\n                      "evening": [18]}',
        '{ "morning" : [ 9,10 ], "evening":[18] }',
    ),
    "whitespace inside plain-text data": lambda s: s.replace(
        "Bring the   receipt", "\n      Bring   the receipt\n    "
    ),
}


@pytest.mark.parametrize("edit", sorted(COSMETIC))
def test_a_cosmetic_edit_keeps_the_identity(edit: str) -> None:
    edited = COSMETIC[edit](CHART)
    assert edited != CHART
    assert identity(edited) == identity(CHART)


@pytest.mark.parametrize("edit", sorted(COSMETIC))
def test_a_position_stays_loadable_across_a_cosmetic_edit(edit: str) -> None:
    old = statifier.compile(CHART)
    state, _ = statifier.initialize(old, session_id="s1")
    state, _ = statifier.handle_event(state, statifier.Event(name="order"))
    blob = position.dumps(state)
    new = statifier.compile(COSMETIC[edit](CHART))
    assert new.source != old.source
    loaded = position.loads(blob, new)
    assert loaded.active_leaf_ids() == ("waiting",)
    assert loaded.datamodel["count"] == 1


def test_inline_markup_ignores_whitespace_between_its_elements() -> None:
    template = (
        f'<scxml xmlns="{NS}"><state id="a"><onentry><send event="e">'
        "<content>{}</content></send></onentry></state></scxml>"
    )
    compact = template.format("<order><item n='1'/></order>")
    spaced = template.format("\n  <order>\n    <item n='1'/>\n  </order>\n")
    assert identity(compact) == identity(spaced)
    assert identity(compact) != identity(template.format("<order><item n='2'/></order>"))


# -- meaning changes it ----------------------------------------------------------------------

MEANINGFUL = {
    "a guard": ('cond="count &lt; 3"', 'cond="count &lt; 4"'),
    "a guard's spelling": ('cond="count &lt; 3"', 'cond="count&lt;3"'),
    "a target": ('event="picked" target="done"', 'event="picked" target="idle"'),
    "an event": ('event="picked"', 'event="picked.up"'),
    "a transition type": (
        'event="picked" target="done"',
        'event="picked" target="done" type="internal"',
    ),
    "an assignment": ('expr="count + 1"', 'expr="count + 2"'),
    "a delay": ('delay="2d"', 'delay="3d"'),
    "a send id": ('<send id="expiry"', '<send id="expiry2"'),
    "a script line": ("label = 'x'", "label = 'y'"),
    "inline JSON data": ('"evening": [18]', '"evening": [19]'),
    "JSON key order": (
        '{"morning": [9, 10],\n                      "evening": [18]}',
        '{"evening": [18], "morning": [9, 10]}',
    ),
    "plain-text data": ("Bring the   receipt", "Bring a receipt"),
    "a state id": ('"idle"', '"resting"'),
    "a new state": ('<final id="done"/>', '<final id="done"/><state id="extra"/>'),
    "a state added before another": (
        '  <state id="idle">',
        '  <state id="spare"/>\n  <state id="idle">',
    ),
    "the initial state": ('initial="idle"', 'initial="waiting"'),
    "an onexit block": ('<cancel sendid="expiry"/>', '<cancel sendid="other"/>'),
    "an element's namespace": (
        '<final id="done"/>',
        '<final id="done"/><x:note xmlns:x="urn:notes"/>',
    ),
}


@pytest.mark.parametrize("edit", sorted(MEANINGFUL))
def test_a_change_of_meaning_changes_the_identity(edit: str) -> None:
    old, new = MEANINGFUL[edit]
    assert old in CHART
    edited = CHART.replace(old, new)
    assert identity(edited) != identity(CHART)


def test_indentation_inside_a_script_is_meaningful() -> None:
    template = (
        f'<scxml xmlns="{NS}"><datamodel><data id="n" expr="0"/></datamodel><state id="a">'
        "<onentry><script>\n  if n:\n      n = 1\n  {}n = 2\n</script></onentry></state></scxml>"
    )
    # (the Python datamodel has no blocks; the rule does not depend on the datamodel)
    assert chart_identity(template.format("")) != chart_identity(template.format("    "))


def test_spaces_inside_a_json_string_are_meaningful() -> None:
    template = (
        f'<scxml xmlns="{NS}"><datamodel><data id="x">{{}}</data></datamodel><state/></scxml>'
    )
    assert identity(template.format('["a b"]')) != identity(template.format('["a  b"]'))
    assert identity(template.format('["a b"]')) == identity(template.format('[ "a b" ]'))


def test_a_position_of_another_revision_is_refused() -> None:
    old = statifier.compile(CHART)
    state, _ = statifier.initialize(old, session_id="s1")
    changed = statifier.compile(CHART.replace('cond="count &lt; 3"', 'cond="count &lt; 4"'))
    with pytest.raises(position.IdentityMismatch) as caught:
        position.loads(position.dumps(state), changed)
    assert (caught.value.found, caught.value.expected) == (old.identity, changed.identity)


def test_chart_identity_refuses_what_does_not_parse() -> None:
    with pytest.raises(statifier.ChartError):
        chart_identity(b"<scxml")
    with pytest.raises(statifier.ChartError, match="not supported"):
        chart_identity(f'<scxml xmlns="{NS}" datamodel="lisp"><state/></scxml>')
