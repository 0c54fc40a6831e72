"""Read the W3C SCXML IRP ``manifest.xml`` into :class:`Case` records.

Each ``<assert>`` of the manifest holds exactly one ``<test>``; a :class:`Case` is that test
with its conformance level, whether it is manual, the specification section and the start
and dependency file names (the manifest's ``NNN/`` directory level dropped, so
``403/test403a.txml`` becomes ``test403a.txml``).

:func:`skip_reason` says why a case cannot run on our engine (``manual``,
``ecmascript_profile``, ``xpath_profile``, ``needs_http``), or ``None`` if it can.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from defusedxml import ElementTree as DefusedET

from tools.w3c.corpus import corpus_dir

__all__ = [
    "SKIP_ECMASCRIPT",
    "SKIP_HTTP",
    "SKIP_MANUAL",
    "SKIP_XPATH",
    "Case",
    "automated",
    "cases_by_id",
    "load_manifest",
    "mandatory_automated",
    "parse_manifest",
    "runnable",
    "skip_reason",
]

Conformance = Literal["mandatory", "optional"]

#: The case must be judged by a person (log output, or whether the document is rejected).
SKIP_MANUAL = "manual"
#: ECMAScript-profile test (spec section C.2): needs the ECMAScript datamodel.
SKIP_ECMASCRIPT = "ecmascript_profile"
#: XPath-profile test (spec section C.3): needs the XPath datamodel.
SKIP_XPATH = "xpath_profile"
#: Needs the BasicHTTP Event I/O processor (section D.2, and test 201).
SKIP_HTTP = "needs_http"

_BASIC_HTTP_MARKERS = ("BasicHTTPEventProcessor", "basicHTTPAccessURITarget")


@dataclass(frozen=True, slots=True)
class Case:
    """One IRP test: the documents to run (all must pass) and what they load."""

    id: str
    conformance: Conformance
    manual: bool
    specnum: str
    starts: tuple[str, ...]
    deps: tuple[str, ...]

    @property
    def mandatory(self) -> bool:
        """True for a mandatory (not optional) case."""
        return self.conformance == "mandatory"


def _file_name(uri: str) -> str:
    return uri.rsplit("/", 1)[-1]


def parse_manifest(text: str) -> list[Case]:
    """Parse the text of ``manifest.xml`` into cases, in document order."""
    root = DefusedET.fromstring(text)  # the manifest comes off the network
    cases: list[Case] = []
    for assertion in root.iter("assert"):
        tests = assertion.findall("test")
        if len(tests) != 1:
            raise ValueError(f"assert {assertion.get('id')}: expected one <test>, got {len(tests)}")
        test = tests[0]
        conformance: Conformance
        match test.get("conformance"):
            case "mandatory":
                conformance = "mandatory"
            case "optional":
                conformance = "optional"
            case other:
                raise ValueError(f"test {test.get('id')}: bad conformance {other!r}")
        manual = test.get("manual")
        if manual not in ("true", "false"):
            raise ValueError(f"test {test.get('id')}: bad manual flag {manual!r}")
        cases.append(
            Case(
                id=test.get("id") or "",
                conformance=conformance,
                manual=manual == "true",
                specnum=assertion.get("specnum") or "",
                starts=tuple(_file_name(s.get("uri") or "") for s in test.findall("start")),
                deps=tuple(_file_name(d.get("uri") or "") for d in test.findall("dep")),
            )
        )
    return cases


@functools.cache
def _load(directory: Path) -> tuple[Case, ...]:
    return tuple(parse_manifest((directory / "manifest.xml").read_text(encoding="utf-8")))


def load_manifest(directory: Path | None = None) -> list[Case]:
    """All cases of the corpus manifest (``directory`` defaults to :func:`corpus_dir`)."""
    return list(_load(directory or corpus_dir()))


def cases_by_id(directory: Path | None = None) -> dict[str, Case]:
    """The manifest's cases keyed by test id."""
    return {case.id: case for case in load_manifest(directory)}


def automated(directory: Path | None = None) -> list[Case]:
    """Every non-manual case, mandatory and optional."""
    return [case for case in load_manifest(directory) if not case.manual]


def mandatory_automated(directory: Path | None = None) -> list[Case]:
    """The mandatory, non-manual cases (159 in the IRP of 2014)."""
    return [case for case in automated(directory) if case.mandatory]


@functools.cache
def _uses_basic_http(directory: Path, starts: tuple[str, ...]) -> bool:
    for start in starts:
        path = directory / start
        if path.suffix == ".txml" and path.is_file():
            text = path.read_text(encoding="utf-8")
            if any(marker in text for marker in _BASIC_HTTP_MARKERS):
                return True
    return False


def skip_reason(case: Case, directory: Path | None = None, profile: str = "python") -> str | None:
    """Why ``case`` cannot run on our engine in ``profile``, or ``None`` if it can.

    Order of precedence: ``manual``, ``ecmascript_profile`` (section C.2, in every profile
    but ``ecmascript``), ``xpath_profile`` (C.3), ``needs_http`` (D.2, or a start document
    that uses the BasicHTTP processor, e.g. test 201).
    """
    if case.manual:
        return SKIP_MANUAL
    if case.specnum == "C.2" and profile != "ecmascript":
        return SKIP_ECMASCRIPT
    if case.specnum == "C.3":
        return SKIP_XPATH
    if case.specnum == "D.2" or _uses_basic_http(directory or corpus_dir(), case.starts):
        return SKIP_HTTP
    return None


def runnable(directory: Path | None = None, profile: str = "python") -> list[Case]:
    """The automated cases (mandatory and optional) that have no :func:`skip_reason`."""
    return [case for case in automated(directory) if skip_reason(case, directory, profile) is None]
