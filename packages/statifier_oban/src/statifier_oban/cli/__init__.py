"""The command line: ``statifier-oban`` and its subcommands.

``_main`` holds the command registry, the parser and the commands every install has
(``install``, ``worker``, ``pending``, ``demo``); ``_executions`` and ``_revisions`` add
the ``executions`` commands when ``statifier_persistence`` is installed. Public: ``main``
(the console script ``statifier_oban.cli:main``) and ``WORKER_NAME`` (the oban instance
name the worker runs as, found in ``oban_leaders`` and ``oban_producers``).
"""

from __future__ import annotations

from ._main import WORKER_NAME, main

__all__ = ["WORKER_NAME", "main"]
