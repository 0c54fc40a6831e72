"""Resource limits that keep every compile and evaluation cheap and bounded."""

from typing import Final

MAX_SOURCE_LENGTH: Final = 10_000
"""Longest accepted expression or location source, in characters."""

MAX_SCRIPT_SOURCE_LENGTH: Final = 100_000
"""Longest accepted script source, in characters."""

MAX_AST_DEPTH: Final = 64
"""Deepest accepted nesting of syntax-tree nodes."""

MAX_INT_BITS: Final = 4096
"""Integers produced by arithmetic must fit in this many bits (sign excluded)."""

MAX_POWER_EXPONENT: Final = 10_000
"""Largest integer exponent accepted by ``**`` on two integers."""

MAX_SEQUENCE_LENGTH: Final = 1_000_000
"""Longest string or list an operation may produce, and most iterations of one loop."""

MAX_ROUND_DIGITS: Final = 10_000
"""Largest ``ndigits`` magnitude accepted by ``round`` on integers."""

STEP_BUDGET: Final = 1_000_000
"""Work units one evaluation (or one script run) may spend: loop steps and element copies."""

LOOP_NODE_COST: Final = 2
"""Budget units charged per syntax node of a comprehension body, per iteration.

Interpreting one node costs far more than copying one element in C, hence the weight.
"""
