-- A live session resumes from a position whose timer counter is %(counter)s: every
-- ordinal above it was used by a step that position does not hold (its process died
-- before the step's position was saved). That step's pending timers are cancelled, with
-- the reason on the row: the resumed session never armed them. ADR 14.
UPDATE {prefix}.oban_jobs
SET state = 'cancelled', cancelled_at = timezone('UTC', now()),
    errors = errors || jsonb_build_array(jsonb_build_object(
        'at', timezone('UTC', now()), 'attempt', attempt,
        'error', 'cancelled: armed by a step after the resumed position (timer counter '
                 || %(counter)s || ')'))
WHERE worker = {timer_worker} AND args->>'scope' = %(scope)s AND state IN ({pending_states})
  AND jsonb_typeof(args->'ordinal') = 'number' AND (args->'ordinal')::numeric > %(counter)s
RETURNING id
