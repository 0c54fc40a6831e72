-- The prompt stager's step (statifier_oban.latency): make due scheduled and retryable
-- jobs of the given queues available, and name the queues to wake: those it staged into,
-- plus those that already had available jobs.
WITH locked AS (
    SELECT id FROM {prefix}.oban_jobs
    WHERE state = ANY('{scheduled,retryable}')
      AND queue = ANY(%(queues)s::text[])
      AND scheduled_at <= timezone('UTC', now())
    ORDER BY scheduled_at ASC, id ASC
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
staged AS (
    UPDATE {prefix}.oban_jobs AS jobs SET state = 'available'::{prefix}.oban_job_state
    FROM locked WHERE jobs.id = locked.id
    RETURNING jobs.queue
)
SELECT queue, count(*) FROM staged GROUP BY queue
UNION ALL
SELECT q.queue, 0 FROM unnest(%(queues)s::text[]) AS q(queue)
WHERE EXISTS (SELECT 1 FROM {prefix}.oban_jobs WHERE state = 'available' AND queue = q.queue)
