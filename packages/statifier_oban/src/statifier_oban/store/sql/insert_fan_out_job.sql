-- Store one settlement or cascade job of a fan-out ({worker}: args scope, invoke_id and
-- macrostep name the fan-out), or one message delivery of an execution's mailbox (args
-- scope names the receiver), and wake the queue's producers. No unique index is needed:
-- the one transaction that settles (or abandons) the fan-out, or writes the message, is
-- the one that stores it.
WITH inserted AS (
    INSERT INTO {prefix}.oban_jobs (args, meta, queue, worker, state)
    VALUES (%(args)s, %(meta)s, %(queue)s, {worker}, 'available')
    RETURNING id, queue
)
SELECT id, pg_notify(%(channel)s, json_build_object('queue', queue)::text)
FROM inserted
