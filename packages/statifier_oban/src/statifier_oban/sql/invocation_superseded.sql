-- Whether invocation (scope, invoke_id) was started again after macrostep %(macrostep)s:
-- an invocation job of a later generation exists (its state was left and re-entered).
SELECT EXISTS (
    SELECT 1 FROM {prefix}.oban_jobs
    WHERE worker = {invoke_worker} AND args->>'scope' = %(scope)s
      AND args->>'invoke_id' = %(invoke_id)s AND (args->>'macrostep')::bigint > %(macrostep)s
)
