-- The children of a fan-out in index order: how each ended and its donedata. The donedata
-- is transferred only when all of it together is within %(max_bytes)s (the `total` column
-- says how much there is); a failure reason only within %(max_reason)s characters.
SELECT c.child_index, c.child_id, c.finished_status, c.failed,
       sum(octet_length((e.outcome -> 'donedata')::text)) OVER () AS total,
       CASE WHEN sum(octet_length((e.outcome -> 'donedata')::text)) OVER () <= %(max_bytes)s
            THEN (e.outcome -> 'donedata')::text END,
       CASE WHEN char_length(e.failure ->> 'reason') <= %(max_reason)s
            THEN e.failure ->> 'reason' END
FROM {schema}.statifier_fan_out_children AS c
JOIN {schema}.statifier_executions AS e ON e.id = c.child_id
WHERE c.parent_id = %(parent_id)s AND c.invoke_id = %(invoke_id)s
  AND c.generation = %(generation)s
ORDER BY c.child_index
LIMIT %(limit)s
