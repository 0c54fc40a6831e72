-- A producer's fetch, in one autocommit statement (statifier_oban.store._fetch): take up to
-- %(demand)s available jobs of one queue, in oban's order (priority, scheduled_at, id),
-- skipping rows other producers hold, and mark them executing for this attempt, as oban
-- 0.7.0's own fetch does (a row whose attempts are used up is not taken). The first
-- column counts the rows that were there to take, so the producer can tell a queue that
-- ran dry from a full fetch; a fetch that takes nothing still returns that one count.
-- The timestamps (stored without a time zone, in UTC) come back as timestamptz: the job
-- gets them aware, instead of each made aware by a datetime.replace in Python.
WITH locked AS (
    SELECT id FROM {prefix}.oban_jobs
    WHERE state = 'available' AND queue = %(queue)s
    ORDER BY priority ASC, scheduled_at ASC, id ASC
    LIMIT %(demand)s
    FOR UPDATE SKIP LOCKED
),
taken AS (
    UPDATE {prefix}.oban_jobs AS jobs
    SET attempt = jobs.attempt + 1,
        attempted_at = timezone('UTC', now()),
        attempted_by = %(attempted_by)s::text[],
        state = 'executing'
    FROM locked
    WHERE jobs.id = locked.id AND jobs.attempt < jobs.max_attempts
    RETURNING jobs.id, jobs.state::text, jobs.queue, jobs.worker, jobs.attempt,
              jobs.max_attempts, jobs.priority, jobs.args, jobs.meta, jobs.errors, jobs.tags,
              jobs.attempted_by,
              timezone('UTC', jobs.inserted_at) AS inserted_at,
              timezone('UTC', jobs.attempted_at) AS attempted_at,
              timezone('UTC', jobs.cancelled_at) AS cancelled_at,
              timezone('UTC', jobs.completed_at) AS completed_at,
              timezone('UTC', jobs.discarded_at) AS discarded_at,
              timezone('UTC', jobs.scheduled_at) AS scheduled_at
)
SELECT (SELECT count(*) FROM locked) AS available, taken.*
FROM (SELECT 1) AS one
LEFT JOIN taken ON true
