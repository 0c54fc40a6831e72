-- The test clock of statifier_oban.testing, for test databases only: nothing in a running
-- host ever executes it. Time moves forward by moving the due time of every scheduled or
-- retryable job of the given queues earlier: by the time until the earliest of them is
-- due if that is at most %(span_us)s microseconds away and %(to_next_due)s is true, else
-- by the whole span. The jobs keep their order and the distances between them, so the
-- statements that run next (the staging step, the producers' fetch) find due exactly the
-- jobs they would find once that much time had passed. One row: how far the clock moved
-- (microseconds), whether a job is due now, and the database's time (UTC), which a span
-- of 0 only reads.
WITH next AS (
    SELECT min(scheduled_at) - timezone('UTC', now()) AS wait
    FROM {prefix}.oban_jobs
    WHERE state = ANY('{scheduled,retryable}') AND queue = ANY(%(queues)s::text[])
),
step AS (
    SELECT CASE WHEN reached AND %(to_next_due)s THEN greatest(wait, interval '0')
                ELSE span END AS shift,
           reached
    FROM (
        SELECT wait, span, wait IS NOT NULL AND wait <= span AS reached
        FROM next, (SELECT %(span_us)s * interval '1 microsecond' AS span) AS given
    ) AS judged
),
moved AS (
    UPDATE {prefix}.oban_jobs AS jobs SET scheduled_at = jobs.scheduled_at - step.shift
    FROM step
    WHERE jobs.state = ANY('{scheduled,retryable}') AND jobs.queue = ANY(%(queues)s::text[])
      AND step.shift > interval '0'
)
SELECT (extract(epoch FROM shift) * 1000000)::bigint AS moved_us, reached,
       timezone('UTC', now()) AS db_now
FROM step
