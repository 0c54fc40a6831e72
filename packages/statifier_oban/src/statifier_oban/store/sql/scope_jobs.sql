-- A scope's pending timer jobs and its unfinished invocation jobs, by due time (for an
-- operator's `statifier-oban executions show`). At most %(limit)s rows. Their args are as
-- anyone wrote them: a text field comes back only within %(max_string)s characters, the
-- ordinal only as a JSON number of at most %(max_digits)s characters (else null), so no
-- row's size reaches the reader; the due time within the years a Python datetime holds
-- (PostgreSQL's run from 4713 BC to 294276 AD and on to infinity: one such row would fail
-- the whole read).
SELECT id, worker, state::text,
       CASE WHEN char_length(args->>'send_id') <= %(max_string)s THEN args->>'send_id' END,
       CASE WHEN char_length(args->>'event') <= %(max_string)s THEN args->>'event' END,
       CASE WHEN jsonb_typeof(args->'ordinal') = 'number'
             AND char_length(args->>'ordinal') <= %(max_digits)s THEN args->'ordinal' END,
       CASE WHEN char_length(args->>'invoke_id') <= %(max_string)s THEN args->>'invoke_id' END,
       LEAST(GREATEST(scheduled_at, '0001-01-01'), '9999-12-31 23:59:59.999999')
FROM {prefix}.oban_jobs
WHERE args->>'scope' = %(scope)s
  AND ((worker = {timer_worker} AND state IN ({pending_states}))
       OR (worker = {invoke_worker} AND state IN ({pending_states}, 'executing')))
ORDER BY scheduled_at, id
LIMIT %(limit)s
