"""statifier_demo: the card-authorization demo of durable timers (``statifier-oban demo``).

Not part of the library: a program that shows ``statifier`` and ``statifier_oban`` at
work. A card authorization's hold timer is stored as an oban job, a process "deploys"
with the timer pending, and a fresh process resumes the session and receives the timer.
``statifier-oban demo`` (or ``python -m statifier_demo``) runs it; :func:`main` is the
entry point both use. The chart ships in this package (``card_authorization.scxml``).
"""

from __future__ import annotations

from ._run import main

__all__ = ["main"]
