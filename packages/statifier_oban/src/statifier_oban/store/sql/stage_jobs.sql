-- The prompt stager's step (statifier_oban.latency), one autocommit statement: make due
-- scheduled and retryable jobs of the given queues available, announce each queue staged
-- into on oban's insert channel (every node's producers of that queue wake up), and
-- report what the stager needs to plan its next step. One row per:
--   'staged'    queue, jobs staged into it (announced);
--   'available' queue that already had available jobs (its local producer is woken);
--   'clock'     the database clock now, and the next due time after now of a scheduled
--               or retryable job of these queues (NULL: none), as epoch seconds (UTC).
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
),
counts AS (
    SELECT queue, count(*) AS staged FROM staged GROUP BY queue
)
SELECT 'staged' AS kind, queue, staged, NULL::float8 AS db_now, NULL::float8 AS next_due,
       pg_notify(%(channel)s, json_build_object('queue', queue)::text)::text AS note
FROM counts
UNION ALL
SELECT 'available', q.queue, 0, NULL, NULL, NULL
FROM unnest(%(queues)s::text[]) AS q(queue)
WHERE EXISTS (SELECT 1 FROM {prefix}.oban_jobs WHERE state = 'available' AND queue = q.queue)
UNION ALL
SELECT 'clock', NULL, NULL, extract(epoch FROM timezone('UTC', now()))::float8,
       extract(epoch FROM (
           SELECT min(scheduled_at) FROM {prefix}.oban_jobs
           WHERE state = ANY('{scheduled,retryable}')
             AND queue = ANY(%(queues)s::text[])
             AND scheduled_at > timezone('UTC', now())
       ))::float8,
       NULL
