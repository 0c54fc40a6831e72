"""Invocations: an ``<invoke>`` of a registered handler type run as an oban job, and fan-out.

Owns the ``InvokeHandler`` base and the answers of ``run`` (``_handler``), enqueuing and
cancelling invocation jobs (``_enqueue``), the invocation row's args (``_args``), a
fan-out's child start jobs (``_fan_out``), and the workers that run invocations and child
starts (``_worker``; durable names ``statifier_oban.workers.InvokeWorker`` and
``...ChildStartWorker``). Public names are exported from ``statifier_oban``.
"""
