"""Download the W3C SCXML 1.0 IRP test suite into a folder the W3C tests can read.

    uv run python -m tools.w3c.fetch_corpus [DEST] [--base-url URL]

It reads the IRP ``manifest.xml`` from the W3C site, then fetches every document the
manifest names (start documents, sub-documents and data files) and stores each under its
file name, without the ``NNN/`` directory level (``355/test355.txml`` becomes
``DEST/test355.txml``): the layout ``tools.w3c.corpus`` expects. DEST defaults to the
folder the tests look in (``$STATIFIER_W3C_CORPUS``, else ``../shared/corpus/w3c`` beside
the checkout); point ``STATIFIER_W3C_CORPUS`` at another DEST to use that instead.

Every download is bounded in size and time; a file the site does not have (the manual
test 513's instructions) is reported and skipped. Exit status 1 if the manifest could not
be read or nothing was stored.
"""

from __future__ import annotations

import argparse
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import TextIO

from tools.w3c.corpus import corpus_dir
from tools.w3c.manifest import parse_manifest

W3C_IRP = "https://www.w3.org/Voice/2013/scxml-irp/"
"""Where the W3C publishes the Implementation Report Plan's tests."""

MAX_FILE_BYTES = 2_000_000
"""No test document or manifest is anywhere near this; a bigger answer is refused."""

TIMEOUT_S = 30


class FetchError(Exception):
    """A document could not be downloaded."""


def fetch(url: str) -> bytes:
    """The body at ``url`` (at most ``MAX_FILE_BYTES``), or ``FetchError``."""
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise FetchError(f"{url}: only http and https URLs are fetched")
    try:
        # The scheme is checked above: no file: or custom schemes.
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:  # noqa: S310
            body: bytes = response.read(MAX_FILE_BYTES + 1)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise FetchError(f"{url}: {exc}") from None
    if len(body) > MAX_FILE_BYTES:
        raise FetchError(f"{url}: larger than {MAX_FILE_BYTES} bytes")
    return body


def download(base_url: str, dest: Path, *, out: TextIO | None = None) -> tuple[int, list[str]]:
    """Fetch the manifest and every file it names into ``dest``.

    Returns how many files were stored and the problems met (one line each).
    """
    base = base_url if base_url.endswith("/") else base_url + "/"
    manifest = fetch(base + "manifest.xml")
    cases = parse_manifest(manifest.decode("utf-8"))
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "manifest.xml").write_bytes(manifest)
    stored = 1
    problems: list[str] = []
    for case in cases:
        for name in (*case.starts, *case.deps):
            if not name or "/" in name or name.startswith("."):
                problems.append(f"test {case.id}: refusing file name {name!r}")
                continue
            try:
                body = fetch(f"{base}{case.id}/{name}")
            except FetchError as exc:
                problems.append(str(exc))
                continue
            (dest / name).write_bytes(body)
            stored += 1
    print(f"stored {stored} files in {dest}", file=out or sys.stdout)
    return stored, problems


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", nargs="?", type=Path, default=None, help="default: %(default)s")
    parser.add_argument("--base-url", default=W3C_IRP, help="default: %(default)s")
    args = parser.parse_args(argv)
    dest: Path = args.dest if args.dest is not None else corpus_dir()
    try:
        stored, problems = download(args.base_url, dest)
    except (FetchError, ValueError) as exc:
        print(f"fetch_corpus: cannot read the manifest: {exc}", file=sys.stderr)
        return 1
    for problem in problems:
        print(f"fetch_corpus: skipped {problem}", file=sys.stderr)
    return 0 if stored > 1 else 1


if __name__ == "__main__":
    sys.exit(main())
