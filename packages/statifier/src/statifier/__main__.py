"""``python -m statifier``: the ``statifier`` command line."""

import sys

from statifier.cli import main

sys.exit(main())
