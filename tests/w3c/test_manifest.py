"""Unit tests for the manifest reader, the corpus resolver and the passing.txt helpers."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tools.w3c.corpus import CORPUS_ENV_VAR, corpus_dir, require_corpus
from tools.w3c.manifest import (
    SKIP_ECMASCRIPT,
    SKIP_HTTP,
    SKIP_MANUAL,
    SKIP_XPATH,
    Case,
    automated,
    cases_by_id,
    load_manifest,
    mandatory_automated,
    parse_manifest,
    runnable,
    skip_reason,
)
from tools.w3c.passing import add_passing, read_passing
from tools.w3c.resolver import corpus_resolver, make_resolver
from tools.w3c.transform import transform_file

require_corpus()

CORPUS = corpus_dir()


def test_corpus_dir_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(CORPUS_ENV_VAR, str(tmp_path))
    assert corpus_dir() == tmp_path.resolve()
    monkeypatch.delenv(CORPUS_ENV_VAR)
    assert (corpus_dir() / "manifest.xml").is_file()


# --------------------------------------------------------------------------------------
# Manifest
# --------------------------------------------------------------------------------------


def test_manifest_counts() -> None:
    cases = load_manifest()
    assert len(cases) == 231
    assert len({c.id for c in cases}) == 231
    assert sum(len(c.starts) for c in cases) == 233
    assert sum(len(c.deps) for c in cases) == 11
    assert sum(c.mandatory for c in cases) == 167
    assert len(mandatory_automated()) == 159
    assert len(automated()) == 222
    assert {c.id for c in cases if c.mandatory and c.manual} == {
        "178", "230", "250", "301", "307", "313", "314", "415",
    }  # fmt: skip


def test_case_fields() -> None:
    cases = cases_by_id()
    assert cases["403"] == Case(
        id="403",
        conformance="mandatory",
        manual=False,
        specnum="3.13",
        starts=("test403a.txml", "test403b.txml", "test403c.txml"),
        deps=(),
    )
    assert cases["226"].deps == ("test226sub1.txml",)
    assert cases["552"].deps == ("test552.txt",)
    assert cases["513"].starts == ("test513.txt",)
    assert cases["193"].conformance == "optional"


def test_every_txml_start_and_dep_exists() -> None:
    names = {n for c in load_manifest() for n in (*c.starts, *c.deps) if n.endswith(".txml")}
    assert len(names) == 237
    assert all((CORPUS / name).is_file() for name in names)
    assert names == {p.name for p in CORPUS.glob("*.txml")}


def test_skip_categories() -> None:
    reasons = Counter(skip_reason(c) for c in automated())
    assert reasons == {None: 160, SKIP_XPATH: 30, SKIP_ECMASCRIPT: 20, SKIP_HTTP: 12}
    cases = cases_by_id()
    assert skip_reason(cases["201"]) == SKIP_HTTP  # 6.2, but uses BasicHTTP
    assert skip_reason(cases["513"]) == SKIP_MANUAL
    assert skip_reason(cases["278"]) == SKIP_ECMASCRIPT
    assert skip_reason(cases["436"]) is None  # null datamodel, mandatory
    assert {c.id for c in runnable() if not c.mandatory} == {"193"}
    assert all(skip_reason(c) is None for c in mandatory_automated())


def test_skip_categories_of_the_ecmascript_profile() -> None:
    reasons = Counter(skip_reason(c, profile="ecmascript") for c in automated())
    assert reasons == {None: 180, SKIP_XPATH: 30, SKIP_HTTP: 12}
    assert {c.id for c in runnable(profile="ecmascript") if c.specnum == "C.2"} == {
        c.id for c in automated() if c.specnum == "C.2"
    }


def test_parse_manifest_rejects_bad_conformance() -> None:
    bad = (
        '<assertions><assert id="1" specnum="3.2"><test id="1" conformance="maybe" '
        'manual="false"><start uri="1/test1.txml"/></test></assert></assertions>'
    )
    with pytest.raises(ValueError, match="conformance"):
        parse_manifest(bad)


# --------------------------------------------------------------------------------------
# Resolver
# --------------------------------------------------------------------------------------


def test_resolver_transforms_subdocuments() -> None:
    text = corpus_resolver("file:test226sub1.scxml")
    assert text == transform_file(CORPUS / "test226sub1.txml")
    assert 'datamodel="python"' in text


def test_resolver_reads_data_files() -> None:
    assert corpus_resolver("file:test552.txt") == (CORPUS / "test552.txt").read_text()
    assert corpus_resolver("file:test446.txt").strip() == "[1,2,3]"


@pytest.mark.parametrize(
    "uri",
    [
        "foo",
        "file:no-such-script.py",
        "file:test999sub1.scxml",
        "file:test999.txt",
        "file:test226sub1.txml",
        "file:../test226sub1.scxml",
        "http://example.com/test226sub1.scxml",
        "",
    ],
)
def test_resolver_rejects_everything_else(uri: str) -> None:
    with pytest.raises(LookupError):
        corpus_resolver(uri)


def test_make_resolver_uses_the_given_directory(tmp_path: Path) -> None:
    (tmp_path / "test1.txt").write_text("hello")
    resolve = make_resolver(tmp_path)
    assert resolve("file:test1.txt") == "hello"
    with pytest.raises(LookupError):
        resolve("file:test552.txt")


# --------------------------------------------------------------------------------------
# passing.txt helpers
# --------------------------------------------------------------------------------------


def test_read_passing(tmp_path: Path) -> None:
    path = tmp_path / "passing.txt"
    path.write_text("# header\n\n144\n  147  # note\n# gone\n144\n")
    assert read_passing(path) == ["144", "147", "144"]
    assert read_passing(tmp_path / "missing.txt") == []


def test_add_passing_sorts_and_never_removes(tmp_path: Path) -> None:
    path = tmp_path / "passing.txt"
    path.write_text("# ratchet\n# grow only\n\n200\n# about 150\n150  # flaky once\n")
    assert add_passing(["147", "200", "403", "1000"], path) == ["147", "403", "1000"]
    assert path.read_text() == (
        "# ratchet\n# grow only\n\n147\n# about 150\n150  # flaky once\n200\n403\n1000\n"
    )
    assert add_passing(["147"], path) == []
    assert read_passing(path) == ["147", "150", "200", "403", "1000"]


def test_add_passing_to_header_only_file(tmp_path: Path) -> None:
    path = tmp_path / "passing.txt"
    path.write_text("# header\n")
    assert add_passing(["355", "144"], path) == ["144", "355"]
    assert path.read_text() == "# header\n144\n355\n"
