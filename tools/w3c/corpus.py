"""Location of the W3C SCXML IRP corpus (``*.txml`` templates, ``manifest.xml``, data files)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CORPUS_ENV_VAR", "corpus_dir"]

#: Environment variable that overrides the corpus location.
CORPUS_ENV_VAR = "STATIFIER_W3C_CORPUS"


def corpus_dir() -> Path:
    """Return the corpus directory.

    ``$STATIFIER_W3C_CORPUS`` wins when set; otherwise the corpus is the sibling checkout
    ``<repo>/../shared/corpus/w3c``.
    """
    override = os.environ.get(CORPUS_ENV_VAR)
    if override:
        return Path(override).expanduser().resolve()
    return (Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "w3c").resolve()
