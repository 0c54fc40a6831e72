-- A live session's <cancel> (statifier_oban.DurableTimers) met timer jobs of its send id
-- that a worker is running already. cancel_jobs.sql leaves those alone: one of them is
-- often the very job whose delivery made the chart cancel. Each keeps the cancel's ordinal
-- in meta.cancel_ordinal, written in the cancel's own fenced transaction: if the process
-- dies before the job is acked, a rescue runs it again, and the session resumed from a
-- position that holds the cancel reads the mark (cancel_marks.sql) and drops the fire
-- (ADR 14). A later cancel's mark replaces an earlier one.
UPDATE {prefix}.oban_jobs
SET meta = meta || jsonb_build_object('cancel_ordinal', %(ordinal)s::bigint)
WHERE worker = {timer_worker} AND args->>'scope' = %(scope)s
  AND args->>'send_id' = %(send_id)s AND state = 'executing'
RETURNING id
