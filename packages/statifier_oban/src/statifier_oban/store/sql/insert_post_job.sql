-- Store one BasicHTTP POST of an execution (args: scope, send_id, url, content_type and
-- the body in base64) with the attempts its host allows, and wake the queue's producers.
-- No unique index is needed: the one transaction that makes the send (a step, or a
-- timer's firing) is the one that stores it.
WITH inserted AS (
    INSERT INTO {prefix}.oban_jobs (args, meta, queue, worker, state, max_attempts)
    VALUES (%(args)s, %(meta)s, %(queue)s, {post_worker}, 'available', %(max_attempts)s)
    RETURNING id, queue
)
SELECT id, pg_notify(%(channel)s, json_build_object('queue', queue)::text)
FROM inserted
