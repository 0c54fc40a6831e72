"""Compile and model: SCXML source in, an immutable ``Machine`` out.

``compiler`` parses and validates a chart, ``model`` holds the compiled form (states,
transitions, executable content and the structural queries on them), ``xmltree`` is the
hardened XML reader, ``durations`` parses delays such as ``7d``.
"""
