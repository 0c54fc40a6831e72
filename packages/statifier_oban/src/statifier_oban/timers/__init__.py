"""Durable timers: a ``<send delay>`` kept as an oban job, fired into its session.

Owns scheduling, cancelling and counting timer jobs (``_schedule``), the timer row's args
(``_args``), the worker that fires them (``_worker``; durable name
``statifier_oban.workers.TimerWorker``), and what a live session plugs in: the
``DurableTimers`` host and ``start_session`` (``_host``) and the session lease that
keeps one writer per session (``_lease``, ADR 14). Durable executions schedule through the
same ``_schedule``. Public names are exported from ``statifier_oban``.
"""
