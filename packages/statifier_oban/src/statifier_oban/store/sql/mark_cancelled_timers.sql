-- A live session's <cancel> (statifier_oban.DurableTimers) keeps its ordinal on the timer
-- jobs of its send id it meets, in the cancel's own fenced transaction, just before
-- cancel_jobs.sql cancels the pending ones:
-- * meta.cancelled_by on a pending job (cancelled next): if the session resumes from a
--   position saved before this cancel, the job is put back (restore_cancelled_timers.sql);
-- * meta.cancel_ordinal on a job a worker is running already, which no cancel can stop
--   (often the very job whose delivery made the chart cancel): if the process dies before
--   the job is acked, a rescue runs it again, and a session resumed from a position that
--   holds the cancel drops its fire (cancel_marks.sql).
-- A later cancel's mark replaces an earlier one. ADR 14.
UPDATE {prefix}.oban_jobs
SET meta = meta || jsonb_build_object(
        CASE WHEN state = 'executing' THEN 'cancel_ordinal' ELSE 'cancelled_by' END,
        %(ordinal)s::bigint)
WHERE worker = {timer_worker} AND args->>'scope' = %(scope)s
  AND args->>'send_id' = %(send_id)s AND state IN ({pending_states}, 'executing')
RETURNING id
