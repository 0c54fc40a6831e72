"""``tools/w3c/fetch_corpus.py`` against a W3C-shaped site served on the loopback."""

from __future__ import annotations

import functools
import http.server
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tools.w3c.corpus import require_corpus
from tools.w3c.fetch_corpus import download, main

CORPUS = require_corpus()
CASES = ("355", "226", "552")  # a plain test, one with a sub-document, one with a data file


def _site(root: Path) -> None:
    """The W3C layout: ``manifest.xml`` plus ``NNN/file`` for the chosen cases only."""
    manifest = (CORPUS / "manifest.xml").read_text()
    asserts = re.findall(r"<assert\b.*?</assert>", manifest, flags=re.DOTALL)
    chosen = [a for a in asserts if re.search(r'<test id="(' + "|".join(CASES) + ')"', a)]
    assert len(chosen) == len(CASES)
    (root / "manifest.xml").write_text("<assertions>" + "".join(chosen) + "</assertions>")
    for uri in re.findall(r'uri="([^"]+)"', "".join(chosen)):
        directory, name = uri.split("/")
        if (CORPUS / name).is_file():
            (root / directory).mkdir(exist_ok=True)
            (root / directory / name).write_bytes((CORPUS / name).read_bytes())


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files without logging each request to stderr."""

    def log_message(self, format: str, *args: Any) -> None:
        """Log nothing."""


@pytest.fixture
def site(tmp_path: Path) -> Iterator[str]:
    root = tmp_path / "site"
    root.mkdir()
    _site(root)
    handler = functools.partial(QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_download_flattens_the_w3c_layout(site: str, tmp_path: Path) -> None:
    dest = tmp_path / "corpus"
    stored, problems = download(site, dest)
    assert problems == []
    names = sorted(p.name for p in dest.iterdir())
    assert names == [
        "manifest.xml",
        "test226.txml",
        "test226sub1.txml",
        "test355.txml",
        "test552.txml",
        "test552.txt",
    ]
    assert stored == len(names)
    for name in names[1:]:
        assert (dest / name).read_bytes() == (CORPUS / name).read_bytes()


def test_missing_files_are_reported_and_skipped(site: str, tmp_path: Path) -> None:
    (tmp_path / "site" / "226" / "test226sub1.txml").unlink()
    stored, problems = download(site, tmp_path / "corpus")
    assert stored == 5
    (problem,) = problems
    assert "226/test226sub1.txml" in problem
    assert "404" in problem


def test_command_exit_status(site: str, tmp_path: Path) -> None:
    assert main([str(tmp_path / "corpus"), "--base-url", site]) == 0
    assert main([str(tmp_path / "nothing"), "--base-url", site + "absent/"]) == 1
