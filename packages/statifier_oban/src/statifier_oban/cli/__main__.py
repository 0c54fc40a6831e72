"""``python -m statifier_oban.cli``: the ``statifier-oban`` command."""

from __future__ import annotations

import sys

from ._main import main

sys.exit(main())
