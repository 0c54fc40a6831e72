"""``python -m statifier_demo``: the demo (the same as ``statifier-oban demo``)."""

from __future__ import annotations

import sys

from ._run import main

sys.exit(main())
