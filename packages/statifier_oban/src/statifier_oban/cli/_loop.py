"""The event loop ``statifier-oban worker`` and ``statifier-oban web`` run on (``--loop``,
ADR 36).

``auto`` takes uvloop when it imports (oban requires it, so it does wherever oban
installs) and asyncio's own loop otherwise; ``uvloop`` insists on it; ``asyncio`` never
uses it. uvloop runs the loop's own work in C: scheduling callbacks, the readiness waits
of psycopg's connections, timers. A durable step on it costs a worker about 7% fewer
instructions (``bench/executions.py --callgrind``); the steps are the same code on
either loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Final

import click
from statifier.cli import kit

LOOPS: Final = ("auto", "uvloop", "asyncio")
"""The values ``--loop`` takes; ``auto`` is the default."""

LoopFactory = Callable[[], asyncio.AbstractEventLoop]
"""What ``asyncio.run(..., loop_factory=...)`` takes (None there: asyncio's own loop)."""


def loop_option[F: Callable[..., Any]](what: str) -> Callable[[F], F]:
    """``--loop`` (``$STATIFIER_OBAN_LOOP``): the event loop ``what`` runs on."""
    return click.option(
        "--loop",
        type=click.Choice(LOOPS),
        default="auto",
        show_default=True,
        envvar="STATIFIER_OBAN_LOOP",
        show_envvar=True,
        help=f"the event loop {what} run on: uvloop when it imports (auto), or the one named",
    )


def loop_factory(name: str) -> LoopFactory | None:
    """The factory of the loop ``--loop name`` asks for, for ``asyncio.run`` (None:
    asyncio's own). ``uvloop`` when it does not import is a ``kit.CommandError`` saying
    why; ``auto`` then takes asyncio's."""
    if name not in LOOPS:
        raise kit.CommandError(f"--loop is one of {', '.join(LOOPS)}, not {name!r}")
    if name == "asyncio":
        return None
    try:
        import uvloop
    except ImportError as exc:
        if name == "auto":
            return None
        raise kit.CommandError(f"--loop uvloop: uvloop does not import here ({exc})") from None
    return uvloop.new_event_loop


def loop_name(loop: asyncio.AbstractEventLoop) -> str:
    """Which loop ``loop`` is, by the package of its class: ``uvloop``, ``asyncio``, or
    whatever else a host runs the worker on."""
    return type(loop).__module__.partition(".")[0]
