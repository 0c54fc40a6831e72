"""The test run's own guards: what keeps a broken test from stalling CI."""

from __future__ import annotations

import pytest


def test_every_test_runs_under_a_timeout(request: pytest.FixtureRequest) -> None:
    # pytest-timeout reads its default from the ini file; a run without it (or with the
    # plug-in missing) would let one hang stall CI for its whole 90 minutes.
    assert request.config.pluginmanager.hasplugin("timeout")
    assert float(request.config.getini("timeout")) == 90.0
