"""The ``statifier`` command line.

``check``
    Compile charts, print every error, warning and note as ``file:line:col: severity:
    message [code]``; exit 1 on an error (or, with ``--strict``, a warning); ``--json``
    prints one record per line (the shape is in ``statifier.cli._check``).
``run``
    Drive a chart with events on a virtual clock (or, with ``--live``, in a live session
    with real delays) and print what happened after each step; ``--json`` prints one JSON
    record per line (the shape is in ``statifier.cli._report``).
``diagram``
    Draw a chart as Mermaid, Graphviz DOT or SVG, optionally with a configuration
    highlighted.

Every command takes ``--version``; ``--functions MODULE:NAME`` names a mapping of host
functions the chart may call, imported from the import path and each ``--path DIR`` (the
working directory only if named: ``--path .``). A ``src`` in the chart (``<script>``,
``<data>``, ``<invoke>``) names a file relative to the chart's directory.

The commands are click commands (``statifier.cli._commands``), built from the pieces in
``statifier.cli.kit`` that ``statifier-oban`` shares; click is the ``statifier[cli]`` extra,
so this module imports it only when :func:`main` runs.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from statifier.errors import install_hint

PROG = "statifier"
"""The console script's name."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``statifier`` on ``argv`` (default ``sys.argv[1:]``); return the exit status.

    0 done; 1 a chart that fails, or an error (one line on stderr); 2 a usage error;
    141 standard output closed early. Without click installed, says how to get it.
    """
    try:
        import click  # noqa: F401 - only to say what to install when it is missing
    except ModuleNotFoundError:
        hint = install_hint("statifier", "cli")
        print(f"{PROG}: error: the command line needs click: {hint}", file=sys.stderr)
        return 1
    from statifier.cli import kit
    from statifier.cli._commands import statifier

    return kit.run(statifier, argv, prog=PROG)
