"""The pure core: W3C SCXML Appendix D as functions from a position to effects.

``algorithm`` is the Appendix D port, ``content`` runs executable content, ``state``
is the position (``MachineState``), ``effects`` and ``events`` are the vocabulary it
speaks, ``planner`` turns effects into instructions every driver performs the same
way, and ``position`` serializes a ``MachineState``. Nothing here does I/O.
"""
