"""Tests of the JSON-like value helpers."""

from statifier.datamodel import is_identifier, is_value, parse_inline_content


def test_is_value_accepts_json_like_values() -> None:
    assert is_value(None)
    assert is_value(True)
    assert is_value(3)
    assert is_value(2.5)
    assert is_value("x")
    assert is_value({"a": [1, {"b": None}], "c": "d"})


def test_is_value_rejects_other_types() -> None:
    assert not is_value((1, 2))
    assert not is_value({1: "a"})
    assert not is_value([1, {2, 3}])
    assert not is_value(object())
    assert not is_value({"a": [b"bytes"]})


def test_is_value_accepts_shared_but_rejects_cyclic_structures() -> None:
    shared = [1, 2]
    assert is_value([shared, shared, {"x": shared}])
    cyclic: list[object] = []
    cyclic.append(cyclic)
    assert not is_value(cyclic)
    cyclic_dict: dict[str, object] = {}
    cyclic_dict["self"] = [cyclic_dict]
    assert not is_value(cyclic_dict)


def test_is_value_handles_very_deep_nesting() -> None:
    value: object = 1
    for _ in range(20_000):
        value = [value]
    assert is_value(value)


def test_parse_inline_content_json() -> None:
    assert parse_inline_content('  {"a": [1, 2], "b": null} ') == {"a": [1, 2], "b": None}
    assert parse_inline_content("42") == 42
    assert parse_inline_content('"quoted"') == "quoted"


def test_parse_inline_content_text_is_whitespace_normalised() -> None:
    assert parse_inline_content("\n   hello   \n\t world  ") == "hello world"
    assert parse_inline_content("{not json}") == "{not json}"


def test_parse_inline_content_empty_is_none() -> None:
    assert parse_inline_content("") is None
    assert parse_inline_content(" \n\t ") is None


def test_is_identifier() -> None:
    assert is_identifier("Var1")
    assert is_identifier("_event")
    assert is_identifier("é")
    assert not is_identifier("1x")
    assert not is_identifier("class")
    assert not is_identifier("None")
    assert not is_identifier("__import__")
    assert not is_identifier("a-b")
    assert not is_identifier("")
