"""Charts from untrusted users: entity bombs, external references, huge and deep documents."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import statifier
from statifier import ChartError

NS = 'xmlns="http://www.w3.org/2005/07/scxml"'
REFUSED = {"forbidden-dtd", "forbidden-entity"}
FAST = 0.5  # seconds

# -- watching for file access ---------------------------------------------------------------
# Audit hooks cannot be removed, so one hook is installed for the module and only records
# while a test has switched it on.
_watch: dict[str, Any] = {"on": False, "events": []}


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _watch["on"] and event in ("open", "urllib.Request", "socket.connect"):
        _watch["events"].append((event, str(args[0]) if args else ""))


sys.addaudithook(_audit)


@pytest.fixture
def file_access() -> Iterator[list[tuple[str, str]]]:
    """Every open()/urllib request/socket connect made while the test body runs."""
    events: list[tuple[str, str]] = []
    _watch["events"] = events
    _watch["on"] = True
    try:
        yield events
    finally:
        _watch["on"] = False


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "secret.txt"
    path.write_text("TOP-SECRET-MARKER-7f3a\n")
    return path


def refuse(source: str | bytes) -> ChartError:
    """Compiling is refused quickly with a DTD/entity diagnostic."""
    start = time.perf_counter()
    with pytest.raises(ChartError) as info:
        statifier.compile(source)
    elapsed = time.perf_counter() - start
    assert elapsed < FAST, f"took {elapsed:.3f}s"
    codes = {d.code for d in info.value.diagnostics}
    assert codes, info.value.diagnostics
    assert codes <= REFUSED, info.value.diagnostics
    return info.value


def test_billion_laughs_is_refused() -> None:
    levels = ['<!ENTITY lol0 "lol">']
    for level in range(1, 10):
        refs = f"&lol{level - 1};" * 10
        levels.append(f'<!ENTITY lol{level} "{refs}">')
    source = (
        '<?xml version="1.0"?>\n<!DOCTYPE scxml [\n'
        + "\n".join(levels)
        + f"\n]>\n<scxml {NS}>\n"
        + '  <datamodel><data id="x">&lol9;</data></datamodel>\n'
        + '  <state id="a"><onentry><log label="&lol9;"/></onentry></state>\n'
        + "</scxml>\n"
    )
    refuse(source)


def test_xxe_etc_passwd_is_refused(file_access: list[tuple[str, str]]) -> None:
    source = (
        '<?xml version="1.0"?>\n'
        '<!DOCTYPE scxml [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>\n'
        f'<scxml {NS}>\n  <datamodel><data id="x">&xxe;</data></datamodel>\n'
        '  <state id="a"/>\n</scxml>\n'
    )
    error = refuse(source)
    assert not [e for e in file_access if "passwd" in e[1]]
    assert all("root:" not in d.message for d in error.diagnostics)


def test_xxe_never_reads_the_referenced_file(
    secret: Path, file_access: list[tuple[str, str]]
) -> None:
    source = (
        '<?xml version="1.0"?>\n'
        f'<!DOCTYPE scxml [<!ENTITY xxe SYSTEM "{secret.as_uri()}">]>\n'
        f'<scxml {NS}>\n  <state id="a"><onentry><log expr="\'&xxe;\'"/></onentry></state>\n'
        "</scxml>\n"
    )
    error = refuse(source)
    assert not [e for e in file_access if secret.name in e[1]], file_access
    assert all("TOP-SECRET" not in d.message for d in error.diagnostics)
    assert "TOP-SECRET" not in str(error)


def test_external_dtd_reference_is_refused(
    secret: Path, file_access: list[tuple[str, str]]
) -> None:
    source = (
        '<?xml version="1.0"?>\n'
        f'<!DOCTYPE scxml SYSTEM "{secret.as_uri()}">\n'
        f'<scxml {NS}>\n  <state id="a"/>\n</scxml>\n'
    )
    refuse(source)
    assert not [e for e in file_access if secret.name in e[1]], file_access


def test_external_dtd_over_the_network_is_refused(file_access: list[tuple[str, str]]) -> None:
    source = (
        '<?xml version="1.0"?>\n'
        '<!DOCTYPE scxml PUBLIC "-//EVIL//DTD x//EN" "http://127.0.0.1:9/evil.dtd">\n'
        f'<scxml {NS}>\n  <state id="a"/>\n</scxml>\n'
    )
    refuse(source)
    assert not [e for e in file_access if e[0] != "open"], file_access


def test_parameter_entity_document_is_refused(
    secret: Path, file_access: list[tuple[str, str]]
) -> None:
    source = (
        '<?xml version="1.0"?>\n'
        "<!DOCTYPE scxml [\n"
        f'  <!ENTITY % remote SYSTEM "{secret.as_uri()}">\n'
        "  <!ENTITY % wrapper \"<!ENTITY inner '%remote;'>\">\n"
        "  %remote;\n"
        "]>\n"
        f'<scxml {NS}>\n  <state id="a"/>\n</scxml>\n'
    )
    refuse(source)
    assert not [e for e in file_access if secret.name in e[1]], file_access


def test_internal_subset_without_entities_is_still_refused() -> None:
    source = f'<!DOCTYPE scxml [<!ELEMENT scxml ANY>]>\n<scxml {NS}><state id="a"/></scxml>'
    error = refuse(source)
    assert [d.code for d in error.diagnostics] == ["forbidden-dtd"]


# -- size and depth -----------------------------------------------------------------------


def test_five_megabyte_chart_of_harmless_states() -> None:
    padding = "harmless " * 110
    states = "".join(
        f'  <state id="s{i}"><!-- {padding} -->'
        f'<transition event="next" target="s{i + 1}"/></state>\n'
        for i in range(5_000)
    )
    source = f'<scxml {NS} initial="s0">\n{states}  <final id="s5000"/>\n</scxml>\n'
    assert len(source) > 5_000_000
    start = time.perf_counter()
    try:
        machine = statifier.compile(source)
    except ChartError as exc:  # refusing a big chart cleanly is acceptable
        assert exc.diagnostics  # noqa: PT017 - success is as acceptable as this refusal
    else:
        assert len(machine.states) == 5_002
        assert machine.state("s4999").transitions
    assert time.perf_counter() - start < 5.0


def compiles_or_refuses(source: str) -> None:
    """Compiling either succeeds or raises ChartError; a RecursionError must not escape."""
    try:
        statifier.compile(source)
    except ChartError as exc:
        assert exc.diagnostics  # noqa: PT017 - success is as acceptable as this refusal
    except RecursionError:
        pytest.fail("RecursionError escaped statifier.compile (expected success or ChartError)")


DEPTH = 2_000


def test_deeply_nested_states_do_not_overflow_the_stack() -> None:
    compiles_or_refuses(f"<scxml {NS}>" + "<state>" * DEPTH + "</state>" * DEPTH + "</scxml>")


def test_deeply_nested_executable_content_does_not_overflow_the_stack() -> None:
    nested = '<if cond="True">' * DEPTH + "</if>" * DEPTH
    compiles_or_refuses(f'<scxml {NS}><state id="a"><onentry>{nested}</onentry></state></scxml>')


def test_deeply_nested_inline_data_markup_does_not_overflow_the_stack() -> None:
    nested = '<x:n xmlns:x="urn:example">' * DEPTH + "</x:n>" * DEPTH
    compiles_or_refuses(
        f'<scxml {NS}><datamodel><data id="d">{nested}</data></datamodel><state id="a"/></scxml>'
    )


def test_deeply_nested_foreign_elements_do_not_overflow_the_stack() -> None:
    nested = '<x:n xmlns:x="urn:example">' * DEPTH + "</x:n>" * DEPTH
    compiles_or_refuses(f'<scxml {NS}><state id="a">{nested}</state></scxml>')


def test_moderately_nested_charts_still_compile() -> None:
    depth = 100
    states = "".join(f'<state id="s{i}">' for i in range(depth)) + "</state>" * depth
    foreign = '<x:n xmlns:x="urn:example">' * depth + "</x:n>" * depth
    machine = statifier.compile(f"<scxml {NS}>{states}<state id='f'>{foreign}</state></scxml>")
    assert machine.state(f"s{depth - 1}").depth == depth
    assert len(machine.state(f"s{depth - 1}").ancestors) == depth
    assert [s.id for s in machine.states[-1:]] == ["f"]


# -- encodings and garbage ----------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        bytes(range(0x80, 0x100)) * 4,
        b"\xff\xfe\x00\x81\xc3\x28\xa0\xa1",
        f'<scxml {NS}><state id="caf\u00e9"/></scxml>'.encode("latin-1"),
        b"",
        b"   \n\t  ",
        b"\x00\x00\x00\x00",
    ],
    ids=["high-bytes", "invalid-utf8", "undeclared-latin1", "empty", "whitespace", "nul"],
)
def test_garbage_bytes_are_malformed_xml(source: bytes) -> None:
    with pytest.raises(ChartError) as info:
        statifier.compile(source)
    assert [d.code for d in info.value.diagnostics] == ["malformed-xml"]
