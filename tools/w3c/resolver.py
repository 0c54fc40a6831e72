"""Resolve the ``file:`` URIs used by the IRP templates (``src`` / ``srcexpr``) to text.

The engine takes a ``resolver: Callable[[str], str]``; a resolver that raises means "this
URI cannot be fetched" (the engine turns that into the error the test expects).

- ``file:testNNNsubN.scxml`` -> the transformed text of ``testNNNsubN.txml``;
- ``file:testNNN.txt`` -> the text of that data file;
- anything else (``foo``, ``file:no-such-script.py``, ``http://...``) -> ``LookupError``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from tools.w3c.corpus import corpus_dir
from tools.w3c.transform import DATAMODEL, transform_file

__all__ = ["corpus_resolver", "make_resolver"]

_SUBDOCUMENT = re.compile(r"file:(?:\./)?(test\d+sub\d+)\.scxml")
_DATA_FILE = re.compile(r"file:(?:\./)?(test\d+\.txt)")


def make_resolver(directory: Path | None = None, profile: str = DATAMODEL) -> Callable[[str], str]:
    """A resolver over the corpus in ``directory`` (default: :func:`corpus_dir` at call time).

    Sub-documents are rendered for ``profile``, like the document that loads them.
    """

    def resolve(uri: str) -> str:
        base = directory or corpus_dir()
        if match := _SUBDOCUMENT.fullmatch(uri):
            path = base / f"{match.group(1)}.txml"
            if path.is_file():
                return transform_file(path, profile)
        elif match := _DATA_FILE.fullmatch(uri):
            path = base / match.group(1)
            if path.is_file():
                return path.read_text(encoding="utf-8")
        raise LookupError(f"cannot resolve {uri!r} in the W3C corpus")

    return resolve


def corpus_resolver(uri: str) -> str:
    """Resolve ``uri`` against the corpus; raises :class:`LookupError` if it cannot."""
    return _default(uri)


_default = make_resolver()
