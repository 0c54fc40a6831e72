-- Cancel the pending jobs of one worker under (scope, key): a timer's send_id, or an
-- invocation's (or its child starts') invoke_id. Executing and finished jobs are never
-- touched. The reason is appended to the row's errors for operators.
UPDATE {prefix}.oban_jobs
SET state = 'cancelled', cancelled_at = timezone('UTC', now()),
    errors = errors || jsonb_build_array(jsonb_build_object(
        'at', timezone('UTC', now()), 'attempt', attempt,
        'error', 'cancelled: ' || %(reason)s))
WHERE worker = {worker} AND args->>'scope' = %(scope)s AND args->>{key} = %(value)s
  AND state IN ({pending_states})
RETURNING id
