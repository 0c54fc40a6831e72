"""Near spellings: one edit apart, and the index that finds them among many names."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from statifier.suggest import INDEXED_LENGTH, NearSpellings, one_edit_apart


def _one_edit_from(a: str, alphabet: str) -> set[str]:
    """Every spelling one insertion, deletion, replacement or swap of neighbours away."""
    found = {a[:i] + a[i + 1 :] for i in range(len(a))}
    found |= {a[:i] + c + a[i:] for i in range(len(a) + 1) for c in alphabet}
    found |= {a[:i] + c + a[i + 1 :] for i in range(len(a)) for c in alphabet}
    found |= {a[:i] + a[i + 1] + a[i] + a[i + 2 :] for i in range(len(a) - 1)}
    found.discard(a)
    return found


_SHORT = st.text(alphabet="abc", max_size=6)


@settings(max_examples=500)
@given(_SHORT, _SHORT)
def test_one_edit_apart_is_one_insertion_deletion_replacement_or_swap(a: str, b: str) -> None:
    assert one_edit_apart(a, b) == (b in _one_edit_from(a, "abc"))


# Names on both sides of the longest the index holds: a long common stem, then a tail.
_STEMS = st.sampled_from(["", "x" * (INDEXED_LENGTH - 2), "x" * INDEXED_LENGTH])
_NAMES = st.builds(lambda stem, tail: stem + tail, _STEMS, st.text(alphabet="ab", max_size=3))


@settings(max_examples=300)
@given(st.lists(_NAMES, max_size=12), st.lists(_NAMES, min_size=1, max_size=6))
def test_the_index_finds_what_comparing_with_each_name_finds(
    names: list[str], asked: list[str]
) -> None:
    spellings = NearSpellings(names)
    for name in asked:
        assert spellings.of(name) == sorted({n for n in names if one_edit_apart(name, n)})
