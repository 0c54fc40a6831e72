"""The index of a chart's event descriptors answers as ``name_matches`` does, per list."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from statifier.core.events import DescriptorIndex, name_matches

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
