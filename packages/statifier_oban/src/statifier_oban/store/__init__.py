"""The oban seam: where statifier_oban meets oban and its PostgreSQL tables.

Owns every use of oban's private internals (``_oban_compat``, the one seam, pinned to
``oban<0.8``), our SQL in named files (``sql/``) and its one loader (``_sql``), running
our statements on the host's pool or the caller's connection (``_statements``), the
schema installer (``_schema``, public as ``statifier_oban.schema``), prompt staging and
lean producers (``_latency``, public as ``statifier_oban.latency``; with ``_fetch`` and
``_acks``), and what the worker adds for crashes and stops (``_operations``).
"""
