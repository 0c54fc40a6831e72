-- The existing timer jobs of a scope's ordinals, after insert_timers.sql met conflicts.
SELECT id, state::text, queue, scheduled_at, inserted_at, true, (args->>'ordinal')::int
FROM {prefix}.oban_jobs
WHERE worker = {timer_worker} AND args->>'scope' = %(scope)s
  AND args->>'ordinal' = ANY(%(ordinals)s)
