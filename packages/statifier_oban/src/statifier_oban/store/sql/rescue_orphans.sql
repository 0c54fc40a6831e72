-- Rescue the executing jobs of workers that are gone (statifier-oban worker, every node,
-- every --rescue-interval). oban's Lifeline rescues by age alone (a job executing longer
-- than rescue_after), which must stay above the longest legitimate job; this rescues by
-- liveness, so a crashed worker's jobs come back within seconds.
--
-- A job is orphaned when it has been executing for at least %(after_s)s seconds and the
-- producer that fetched it (attempted_by[2]) is gone: its row was deleted, or, for a
-- producer of our own instance name %(name)s (whose heartbeat interval we set), it has not
-- refreshed its row for %(after_s)s seconds. Producers of other instance names count as
-- alive while their row exists (their own heartbeat interval is unknown here).
--
-- Like oban's Lifeline: back to available with meta.rescued + 1; a job that has used up
-- its attempts is discarded, with the reason appended to its errors.
UPDATE {prefix}.oban_jobs AS j
SET state = CASE WHEN j.attempt >= j.max_attempts
                 THEN 'discarded'::{prefix}.oban_job_state
                 ELSE 'available'::{prefix}.oban_job_state END,
    discarded_at = CASE WHEN j.attempt >= j.max_attempts
                        THEN timezone('UTC', now()) ELSE j.discarded_at END,
    errors = CASE WHEN j.attempt >= j.max_attempts
                  THEN j.errors || jsonb_build_array(jsonb_build_object(
                      'at', timezone('UTC', now()), 'attempt', j.attempt,
                      'error', 'discarded: its worker died and its attempts are used up'))
                  ELSE j.errors END,
    meta = j.meta || jsonb_build_object('rescued', coalesce((j.meta->>'rescued')::int, 0) + 1)
WHERE j.state = 'executing'
  AND j.attempted_at < timezone('UTC', now()) - make_interval(secs => %(after_s)s)
  AND NOT EXISTS (
      SELECT 1
      FROM {prefix}.oban_producers AS p
      WHERE p.uuid::text = j.attempted_by[2]
        AND (p.name <> %(name)s
             OR p.updated_at >= timezone('UTC', now()) - make_interval(secs => %(after_s)s)))
RETURNING j.id
