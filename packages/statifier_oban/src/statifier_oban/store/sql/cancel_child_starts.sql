-- Cancel the pending child starts of one fan-out: one generation (macrostep) of an
-- invocation. Executing and finished starts are never touched.
UPDATE {prefix}.oban_jobs
SET state = 'cancelled', cancelled_at = timezone('UTC', now()),
    errors = errors || jsonb_build_array(jsonb_build_object(
        'at', timezone('UTC', now()), 'attempt', attempt,
        'error', 'cancelled: ' || %(reason)s))
WHERE worker = {child_start_worker} AND args->>'scope' = %(scope)s
  AND args->>'invoke_id' = %(invoke_id)s AND args->>'macrostep' = %(macrostep)s
  AND state IN ({pending_states})
RETURNING id
