-- The existing invocation job of (scope, invoke_id, macrostep).
SELECT id, state::text, queue, true, NULL
FROM {prefix}.oban_jobs
WHERE worker = {invoke_worker} AND args->>'scope' = %(scope)s
  AND args->>'invoke_id' = %(invoke_id)s AND args->>'macrostep' = %(macrostep)s
