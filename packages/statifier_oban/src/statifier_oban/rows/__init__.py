"""Job rows read as untrusted input: what a row may name, and what it holds.

Owns resolving the plug-ins a row names by path, only among what this process registered
(``_resolve``, ADR 13), building them checked against their protocols (``_plugins``),
host-opaque fields that round-trip exactly (``_opaque``), the bounded readers of plain row
fields (``_fields``), and what a worker answers oban for a row (``_outcomes``). Every
other part decodes rows through these.
"""
