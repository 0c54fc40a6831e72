"""The index of a chart's event descriptors answers as ``name_matches`` does, per list."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from statifier.core.events import DescriptorIndex, name_matches

from engine_support.counting import python_steps

# Few letters, dots and stars, so that prefixes, endings and empty segments meet often.
_TEXT = st.text(alphabet="ab.*", min_size=1, max_size=6)
_LISTS = st.lists(st.lists(_TEXT, min_size=1, max_size=3).map(tuple), max_size=6)


@settings(max_examples=400)
@given(_LISTS, st.lists(st.text(alphabet="ab.*", max_size=6), min_size=1, max_size=8))
def test_the_index_matches_what_name_matches_matches(
    lists: list[tuple[str, ...]], names: list[str]
) -> None:
    index = DescriptorIndex(enumerate(lists))
    added = DescriptorIndex()
    for key, descriptors in enumerate(lists):
        added.add(key, descriptors)
    for name in names:
        assert added.matching(name) == index.matching(name)
        expected = {key for key, descriptors in enumerate(lists) if name_matches(descriptors, name)}
        assert index.matching(name) == expected, (lists, name)


def test_the_spec_examples() -> None:
    lists = [("error",), ("error.*",), ("*",), ("err",), ("error.send.failed",), (".*",)]
    index = DescriptorIndex(enumerate(lists))
    assert index.matching("error.send") == {0, 1, 2, 5}
    assert index.matching("error") == {0, 1, 2, 5}
    assert index.matching("errors") == {2, 5}
    assert index.matching("error.send.failed") == {0, 1, 2, 4, 5}
    assert index.matching("done.state.p") == {2, 5}
    assert len(index) == 4  # "error", "err", "error.send.failed", and every name


def test_a_name_of_many_dots_costs_no_slice_per_dot() -> None:
    # An event's name is the sender's: 2,047 dots once cost a prefix sliced and looked up
    # at each (2 ms a lookup); only prefixes of a descriptor's length are read now.
    index = DescriptorIndex((n, (f"ev{n}", f"order.{n}")) for n in range(100))
    dotted = "a." * 2047 + "a"
    assert index.matching(dotted) == set()
    assert index.matching("order.7." + dotted) == {7}
    assert python_steps(lambda: index.matching(dotted)) < 100
