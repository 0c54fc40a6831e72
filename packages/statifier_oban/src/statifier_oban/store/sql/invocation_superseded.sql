-- Whether invocation (scope, invoke_id) was started again after macrostep %(macrostep)s:
-- an invocation job of a later generation exists (its state was left and re-entered).
-- A row whose macrostep is not a number counts as no generation.
SELECT EXISTS (
    SELECT 1 FROM {prefix}.oban_jobs
    WHERE worker = {invoke_worker} AND args->>'scope' = %(scope)s
      AND args->>'invoke_id' = %(invoke_id)s
      AND CASE WHEN args->>'macrostep' ~ '^[0-9]{1,18}$'
               THEN (args->>'macrostep')::bigint END > %(macrostep)s
)
