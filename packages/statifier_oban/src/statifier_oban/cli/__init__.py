"""The command line: ``statifier-oban`` and its subcommands, on click (ADR 23).

``_main`` holds the group, the options many commands share (``database_options``,
``execution_options``), ``install`` and ``pending``; ``_worker`` the worker; ``_db`` the
local database (``db start|stop|status|url``); ``_executions``, ``_history`` and
``_revisions`` the ``executions`` commands, imported only when used, with
``statifier_persistence`` (``_persistence`` holds what they share); ``_web`` the web
server, imported only when used, with ``statifier_web``. Every piece of
output, error and argument parsing comes from ``statifier.cli.kit``. Public: ``main``
(the console script ``statifier_oban.cli:main``) and ``WORKER_NAME`` (the oban instance
name the worker runs as, found in ``oban_leaders`` and ``oban_producers``).
"""

from __future__ import annotations

from ._main import main
from ._worker import WORKER_NAME

__all__ = ["WORKER_NAME", "main"]
