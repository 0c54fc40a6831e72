"""Reading the ``armed`` column back (no database: the column's text is written here).

Storage is as untrusted as a caller: every shape a step never writes is refused, each
with the message that names what is wrong; every shape a step writes reads back as it was.
"""

from __future__ import annotations

import pytest
from statifier_persistence import MAX_ID_LENGTH
from statifier_persistence._armed import Armed, decode_armed


class Corrupt(Exception):
    """What the reader raises for a column a step never writes."""


def test_what_a_step_writes_reads_back() -> None:
    armed = Armed(
        {"expire": [3, 4], "tick": [1]},
        {"job": 0, "child": 2},
        since=5,
        cut={"late"},
        children={"child": "e-2"},
        finished={"child": "e-2"},
    )
    text = armed.encode(["job", "child"])
    read = decode_armed(text, Corrupt)
    assert read.encode(["job", "child"]) == text
    assert (read.since, read.cut, read.children, read.finished) == (
        5,
        {"late"},
        {"child": "e-2"},
        {"child": "e-2"},
    )
    assert read.invocations == {"job": 0, "child": 2}
    assert read.sends == 3


def test_an_empty_object_is_nothing_armed() -> None:
    read = decode_armed("{}", Corrupt)
    assert (read.sends, read.invocations, read.since, read.cut) == (0, {}, 0, set())
    assert (read.children, read.finished) == ({}, {})


def test_a_child_id_at_the_bound_is_read_and_one_over_it_is_refused() -> None:
    at_bound = "c" * MAX_ID_LENGTH
    assert decode_armed(f'{{"children": {{"a": "{at_bound}"}}}}', Corrupt).children == {
        "a": at_bound
    }
    with pytest.raises(Corrupt, match="wrong type"):
        decode_armed(f'{{"children": {{"a": "{at_bound}c"}}}}', Corrupt)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1", "not valid JSON"),
        ("[]", "not an object of sends"),
        ('"sends"', "not an object of sends"),
        ('{"other": 1}', "not an object of sends"),
        ('{"sends": []}', "wrong type"),
        ('{"invocations": []}', "wrong type"),
        ('{"children": []}', "wrong type"),
        ('{"children": {"a": 1}}', "wrong type"),
        ('{"children": {"a": ""}}', "wrong type"),
        ('{"finished": {"a": null}}', "wrong type"),
        ('{"since": "3"}', "wrong type"),
        ('{"since": -1}', "wrong type"),
        ('{"since": true}', "wrong type"),
        ('{"since": 1.0}', "wrong type"),
        ('{"cut": "a"}', "wrong type"),
        ('{"cut": ["a", 1]}', "wrong type"),
        ('{"sends": {"hold": []}}', "no list of ordinals"),
        ('{"sends": {"hold": 1}}', "no list of ordinals"),
        ('{"sends": {"hold": [0]}}', "integer >= 1"),
        ('{"sends": {"hold": [1, true]}}', "integer >= 1"),
        ('{"sends": {"hold": [2.0]}}', "integer >= 1"),
        ('{"invocations": {"job": -1}}', "generation is not an integer >= 0"),
        ('{"invocations": {"job": false}}', "generation is not an integer >= 0"),
    ],
)
def test_a_column_a_step_never_writes_is_refused(text: str, message: str) -> None:
    with pytest.raises(Corrupt, match=message):
        decode_armed(text, Corrupt)


def test_the_lowest_values_a_step_writes_are_read() -> None:
    read = decode_armed('{"sends": {"a": [1]}, "invocations": {"j": 0}, "since": 0}', Corrupt)
    assert (read.sends, read.invocations, read.since) == (1, {"j": 0}, 0)
