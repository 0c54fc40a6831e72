-- The existing timer job of (scope, ordinal), after insert_timer.sql met a conflict.
SELECT id, state::text, queue, scheduled_at, inserted_at, true
FROM {prefix}.oban_jobs
WHERE worker = {timer_worker} AND args->>'scope' = %(scope)s AND args->>'ordinal' = %(ordinal)s
