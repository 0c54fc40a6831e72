-- A live session resumes from a position whose timer counter is %(counter)s. A timer that
-- position armed (ordinal at most the counter) and that a later step's <cancel> cancelled
-- while it was pending (meta.cancelled_by above the counter, mark_cancelled_timers.sql) is
-- pending again: the resumed session never ran that cancel. It is due when it was due
-- (at once if that time has passed), with the reason on the row. ADR 14.
UPDATE {prefix}.oban_jobs
SET state = CASE WHEN scheduled_at > timezone('UTC', now())
                 THEN 'scheduled'::{prefix}.oban_job_state
                 ELSE 'available'::{prefix}.oban_job_state END,
    cancelled_at = NULL,
    meta = meta - 'cancelled_by',
    errors = errors || jsonb_build_array(jsonb_build_object(
        'at', timezone('UTC', now()), 'attempt', attempt,
        'error', 'restored: its <cancel> (ordinal ' || (meta->>'cancelled_by')
                 || ') was of a step after the resumed position (timer counter '
                 || %(counter)s || ')'))
WHERE worker = {timer_worker} AND args->>'scope' = %(scope)s AND state = 'cancelled'
  AND jsonb_typeof(meta->'cancelled_by') = 'number'
  AND (meta->'cancelled_by')::numeric > %(counter)s
  AND jsonb_typeof(args->'ordinal') = 'number' AND (args->'ordinal')::numeric <= %(counter)s
RETURNING id
