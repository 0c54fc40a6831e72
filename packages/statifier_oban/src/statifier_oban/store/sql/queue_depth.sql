-- Jobs waiting or running per queue and state: the queue depth gauge of statifier_oban.otel
-- (sampled every few seconds by a worker, see docs/tracing.md). Finished jobs are left out.
SELECT queue, state::text, count(*)
FROM {prefix}.oban_jobs
WHERE state IN ('available', 'scheduled', 'retryable', 'executing')
GROUP BY queue, state
ORDER BY queue, state
LIMIT %(limit)s
