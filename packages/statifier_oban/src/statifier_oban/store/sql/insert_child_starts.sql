-- Store one child start job per fan-out index that has none yet, and wake the queue's
-- producers. Returns how many were stored.
WITH inserted AS (
    INSERT INTO {prefix}.oban_jobs (args, meta, queue, worker, state)
    SELECT r.args, %(meta)s, %(queue)s, {child_start_worker}, 'available'
    FROM unnest(%(args)s::jsonb[]) AS r(args)
    ON CONFLICT ((args->>'scope'), (args->>'invoke_id'), (args->>'macrostep'), (args->>'index'))
        WHERE worker = {child_start_worker} DO NOTHING
    RETURNING id
)
SELECT count(*), pg_notify(%(channel)s, json_build_object('queue', %(queue)s::text)::text)
FROM inserted
