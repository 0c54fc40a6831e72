"""Location of the W3C SCXML IRP corpus (``*.txml`` templates, ``manifest.xml``, data files)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CORPUS_ENV_VAR", "corpus_dir", "missing_corpus", "require_corpus"]

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


def missing_corpus() -> str | None:
    """Why the corpus cannot be used (with how to get it), or None when it is there."""
    directory = corpus_dir()
    if (directory / "manifest.xml").is_file():
        return None
    return (
        f"the W3C SCXML corpus is not at {directory}: download it with "
        "`uv run python -m tools.w3c.fetch_corpus [DEST]`, or set "
        f"{CORPUS_ENV_VAR} to a folder that holds it"
    )


def require_corpus() -> Path:
    """For test modules: the corpus directory, else skip the module (fail it under CI).

    CI has the corpus beside the checkout, so a missing corpus there is a broken set-up,
    not a reason to skip the conformance ratchet.
    """
    reason = missing_corpus()
    if reason is None:
        return corpus_dir()
    import pytest

    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI runs the W3C tests: they may not be skipped)", pytrace=False)
    pytest.skip(reason, allow_module_level=True)
