-- Store the timer jobs of one drive in one statement, skipping every (scope, ordinal)
-- that already has a row. Returns the rows inserted, with their ordinal; find_timers.sql
-- reads the ones that conflicted. If one of the new timers is due within the announce
-- horizon, the earliest is announced to the prompt stagers (statifier_oban.latency), once
-- per statement, when the caller commits.
WITH rows AS (
    SELECT r.args, r.meta, r.delay_ms
    FROM unnest(%(args)s::jsonb[], %(metas)s::jsonb[], %(delays)s::bigint[])
        AS r(args, meta, delay_ms)
),
inserted AS (
    INSERT INTO {prefix}.oban_jobs (args, meta, queue, worker, state, scheduled_at)
    SELECT args, meta, %(queue)s, {timer_worker}, 'scheduled',
           timezone('UTC', now()) + delay_ms * interval '1 millisecond'
    FROM rows
    ON CONFLICT ((args->>'scope'), (args->>'ordinal')) WHERE worker = {timer_worker} DO NOTHING
    RETURNING id, state::text, queue, scheduled_at, inserted_at, args->>'ordinal' AS ordinal
)
SELECT id, state, queue, scheduled_at, inserted_at, false, ordinal,
       (SELECT pg_notify(%(due_channel)s, json_build_object(
                   'queue', %(queue)s::text, 'at', extract(epoch FROM min(i.scheduled_at)))::text)
        FROM inserted AS i
        HAVING min(i.scheduled_at) < timezone('UTC', now())
                                     + {announce_horizon_ms} * interval '1 millisecond')
FROM inserted
