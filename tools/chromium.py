"""Debian's chromium as the project's tests and tools run it headless.

Playwright drives this browser (``executable_path``) and never downloads one of its own;
``.ci/run`` installs it. The flags keep it quiet and offline: no sandbox (root in CI), no
GPU, no QUIC, no first-run, sync, component or background traffic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

CHROMIUM: Final = Path("/usr/bin/chromium")

FLAGS: Final = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
