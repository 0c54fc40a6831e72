"""Debian's headless chromium, driven by Playwright (which never downloads a browser).

Outside CI a machine without ``/usr/bin/chromium`` skips the browser tests with a message
saying how to get it; under CI (``$CI`` set) a missing browser fails them: ``.ci/run``
installs it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, sync_playwright

from tools.chromium import CHROMIUM, FLAGS


def require_chromium() -> None:
    """Skip (outside CI) or fail (in CI) when Debian's chromium is not installed."""
    if CHROMIUM.exists():
        return
    if os.environ.get("CI"):
        pytest.fail(f"{CHROMIUM} is missing in CI: .ci/run installs Debian's chromium")
    pytest.skip(
        f"the console's browser tests need Debian's chromium ({CHROMIUM}): apt-get install chromium"
    )


@contextlib.contextmanager
def chromium(*flags: str) -> Iterator[Browser]:
    """A headless chromium (given ``flags`` besides the project's), closed on exit."""
    require_chromium()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=[*FLAGS, *flags])
        try:
            yield browser
        finally:
            browser.close()
