-- Store one timer job unless its (scope, ordinal) already has a row, in any state.
-- Returns the new row, or nothing on a conflict (find_timer.sql then reads the old one).
-- The fire time is the database's: now() + delay_ms, computed once, here. A timer due
-- within the announce horizon is announced to the prompt stagers (statifier_oban.latency)
-- with its due time as epoch seconds; the notification goes out when the caller commits.
WITH inserted AS (
    INSERT INTO {prefix}.oban_jobs (args, meta, queue, worker, state, scheduled_at)
    VALUES (
        %(args)s, %(meta)s, %(queue)s, {timer_worker}, 'scheduled',
        timezone('UTC', now()) + %(delay_ms)s * interval '1 millisecond'
    )
    ON CONFLICT ((args->>'scope'), (args->>'ordinal')) WHERE worker = {timer_worker} DO NOTHING
    RETURNING id, state::text, queue, scheduled_at, inserted_at
)
SELECT id, state, queue, scheduled_at, inserted_at, false,
       CASE WHEN %(delay_ms)s < {announce_horizon_ms} THEN pg_notify(%(due_channel)s,
           json_build_object('queue', queue, 'at', extract(epoch FROM scheduled_at))::text)
       END
FROM inserted
