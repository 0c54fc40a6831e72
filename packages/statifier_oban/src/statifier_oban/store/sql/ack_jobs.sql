-- Record what oban's executor decided for a batch of jobs, in one autocommit statement
-- (statifier_oban.store._acks; oban 0.7.0 runs one UPDATE per job in a transaction). Each ack
-- applies only while its row is still the attempt that was fetched: executing, with the
-- same attempted_at; a row rescued and fetched again in between is left alone. Same
-- columns and values as oban's own ack: the state's timestamp, the next scheduled_at of a
-- snooze or a retry, a snooze's attempt given back, an error appended, meta merged.
-- The batch is one jsonb array of acks (one parameter, whatever the batch size), and its
-- ids once more (chosen per use: acked_ids.sql, an array, or acked_id.sql, the one id of a
-- batch of one): the rows are found by primary key, and the state is compared as text, so
-- that oban's state index can never lead the plan. In a burst that index holds thousands
-- of dead 'executing' entries (every acked row leaves one until vacuum) while the
-- statistics count a few live ones: a plan led by it read hundreds of heap pages per ack,
-- most of the database's CPU per fired timer. Returns the ids of the rows changed.
WITH acks AS (
    SELECT *
    FROM jsonb_to_recordset(%(acks)s::jsonb) AS a(
        id bigint, attempted_at timestamp, state text, attempt_change int, schedule_in int,
        error jsonb, meta jsonb
    )
)
UPDATE {prefix}.oban_jobs AS jobs
SET state = acks.state::{prefix}.oban_job_state,
    cancelled_at = CASE WHEN acks.state = 'cancelled'
                        THEN timezone('UTC', now()) ELSE jobs.cancelled_at END,
    completed_at = CASE WHEN acks.state = 'completed'
                        THEN timezone('UTC', now()) ELSE jobs.completed_at END,
    discarded_at = CASE WHEN acks.state = 'discarded'
                        THEN timezone('UTC', now()) ELSE jobs.discarded_at END,
    scheduled_at = CASE WHEN acks.schedule_in IS NULL THEN jobs.scheduled_at
                        ELSE timezone('UTC', now()) + make_interval(secs => acks.schedule_in) END,
    attempt = COALESCE(jobs.attempt + acks.attempt_change, jobs.attempt),
    errors = CASE WHEN acks.error IS NULL THEN jobs.errors ELSE jobs.errors || acks.error END,
    meta = CASE WHEN acks.meta IS NULL THEN jobs.meta ELSE jobs.meta || acks.meta END
FROM acks
WHERE {acked}
  AND jobs.id = acks.id
  AND jobs.state::text = 'executing'
  AND jobs.attempted_at = acks.attempted_at
RETURNING jobs.id
