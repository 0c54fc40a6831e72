"""Read and grow the conformance ratchets: ``tests/w3c/passing.txt`` (Python profile) and
``tests/w3c/passing_ecmascript.txt`` (ECMAScript profile), and
``tests/w3c/passing_durable_invoke.txt`` (the invoke tests of the Python profile that pass as
durable executions, with real jobs and a worker), and ``tests/w3c/passing_basichttp.txt`` and
``tests/w3c/passing_basichttp_ecmascript.txt`` (the BasicHTTP tests that pass against the
real web app on loopback, as durable executions and as live sessions, per profile).

Format: one test id per line (``144``; ``403`` means all three of its start documents),
``#`` starts a comment (a whole line or the rest of a line).  The list only grows: CI
fails if a listed test fails, and :func:`add_passing` never removes a line.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "BASICHTTP_FILES",
    "DURABLE_INVOKE_FILE",
    "PASSING_FILE",
    "PASSING_FILES",
    "add_passing",
    "passing_file",
    "read_passing",
]

_TESTS = Path(__file__).resolve().parents[2] / "tests" / "w3c"

#: The ratchet file of the Python profile.
PASSING_FILE = _TESTS / "passing.txt"

#: The ratchet of the invoke tests (spec 6.4) that pass as durable executions
#: (``packages/statifier_oban/tests/test_w3c_durable_invoke.py``).
DURABLE_INVOKE_FILE = _TESTS / "passing_durable_invoke.txt"

#: The ratchets of the BasicHTTP Event I/O processor's tests (SCXML D.2, and test 201) that
#: pass against the real web app, as durable executions and live sessions, per profile
#: (``packages/statifier_web/tests/test_w3c_basichttp.py``).
BASICHTTP_FILES = {
    "python": _TESTS / "passing_basichttp.txt",
    "ecmascript": _TESTS / "passing_basichttp_ecmascript.txt",
}

#: The ratchet file of each datamodel profile (see ``tools.w3c.transform.PROFILES``).
PASSING_FILES = {"python": PASSING_FILE, "ecmascript": _TESTS / "passing_ecmascript.txt"}


def passing_file(profile: str) -> Path:
    """The ratchet file of ``profile``."""
    return PASSING_FILES[profile]


def _entry_id(line: str) -> str:
    return line.split("#", 1)[0].strip()


def read_passing(path: Path = PASSING_FILE) -> list[str]:
    """The ids listed in ``path``, in file order (duplicates kept so they can be detected)."""
    if not path.exists():
        return []
    return [i for line in path.read_text(encoding="utf-8").splitlines() if (i := _entry_id(line))]


def _sort_key(test_id: str) -> tuple[int, str]:
    return (int(test_id), test_id) if test_id.isdigit() else (1 << 30, test_id)


def add_passing(new_ids: Iterable[str], path: Path = PASSING_FILE) -> list[str]:
    """Add the ids in ``new_ids`` that are not listed yet; return those added (sorted).

    The file is rewritten as its leading comment block followed by all entries sorted by
    numeric id.  Every existing line is kept: inline comments stay on their line, and a
    comment line between entries moves together with the entry that follows it.
    """
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    header: list[str] = []
    position = 0
    while position < len(lines) and not _entry_id(lines[position]):
        header.append(lines[position])
        position += 1
    entries: list[tuple[str, list[str]]] = []
    pending: list[str] = []
    for line in lines[position:]:
        test_id = _entry_id(line)
        if test_id:
            entries.append((test_id, [*pending, line]))
            pending = []
        else:
            pending.append(line)
    known = {test_id for test_id, _ in entries}
    added = sorted({i for i in new_ids if i not in known}, key=_sort_key)
    entries.extend((test_id, [test_id]) for test_id in added)
    entries.sort(key=lambda entry: _sort_key(entry[0]))
    while pending and not pending[-1].strip():
        pending.pop()
    body = [line for _, chunk in entries for line in chunk] + pending
    path.write_text("\n".join([*header, *body]) + "\n", encoding="utf-8")
    return added
