"""What a bench run's command line and worker processes share: counts of at least 1, and
the event loop a worker process of the code under test runs on (ADR 36).

No sibling imports, so tests import it as ``bench.run_options``."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable


def positive(text: str) -> int:
    """An option's whole number of at least 1 (a round of no steps has no rate)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is less than 1")
    return value


def worker_loop() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop a worker process of the code under test runs on: what its
    ``statifier-oban worker`` would choose (ADR 36)."""
    try:
        from statifier_oban.cli._loop import loop_factory
    except ImportError:  # a baseline from before ADR 36: its workers ran on asyncio's loop
        return None
    return loop_factory("auto")
