-- A scope's pending timer jobs and its unfinished invocation jobs, by due time (for an
-- operator's `statifier-oban executions show`). At most %(limit)s rows.
SELECT id, worker, state::text, args->>'send_id', args->>'event', args->>'ordinal',
       args->>'invoke_id', scheduled_at
FROM {prefix}.oban_jobs
WHERE args->>'scope' = %(scope)s
  AND ((worker = {timer_worker} AND state IN ({pending_states}))
       OR (worker = {invoke_worker} AND state IN ({pending_states}, 'executing')))
ORDER BY scheduled_at, id
LIMIT %(limit)s
