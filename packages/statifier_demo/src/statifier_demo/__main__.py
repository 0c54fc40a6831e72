"""``python -m statifier_demo``: the demo, or one of its phase processes (``--phase``)."""

from __future__ import annotations

import sys

from ._run import main

sys.exit(main())
