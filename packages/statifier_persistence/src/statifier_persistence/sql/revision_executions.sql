-- One page of the ids of a revision's executions (in id order), of the given statuses (all
-- when null).
SELECT id
FROM {schema}.statifier_executions
WHERE chart_identity = %(identity)s
  AND (%(statuses)s::text[] IS NULL OR status = ANY(%(statuses)s::text[]))
  AND (%(after)s::text IS NULL OR id > %(after)s::text)
ORDER BY id
LIMIT %(limit)s
