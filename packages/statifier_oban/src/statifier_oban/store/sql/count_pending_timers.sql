-- How many timer jobs are pending per scope (scopes with none are absent).
SELECT args->>'scope', count(*)
FROM {prefix}.oban_jobs
WHERE worker = {timer_worker} AND args->>'scope' = ANY(%(scopes)s)
  AND state IN ({pending_states})
GROUP BY 1
