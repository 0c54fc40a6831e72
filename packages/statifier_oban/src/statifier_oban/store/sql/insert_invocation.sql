-- Store one invocation job unless (scope, invoke_id, macrostep) already has a row, and
-- wake the queue's producers. Returns nothing on a conflict (find_invocation.sql then
-- reads the old row).
WITH inserted AS (
    INSERT INTO {prefix}.oban_jobs (args, meta, queue, worker, state, max_attempts)
    VALUES (%(args)s, %(meta)s, %(queue)s, {invoke_worker}, 'available', %(max_attempts)s)
    ON CONFLICT ((args->>'scope'), (args->>'invoke_id'), (args->>'macrostep'))
        WHERE worker = {invoke_worker} DO NOTHING
    RETURNING id, state::text, queue
)
SELECT id, state, queue, false, pg_notify(%(channel)s, json_build_object('queue', queue)::text)
FROM inserted
