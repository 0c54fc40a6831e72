-- One page of executions by id; each filter applies when its parameter is not null.
SELECT {columns}
FROM {schema}.statifier_executions
WHERE (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(chart)s::text IS NULL OR chart_name = %(chart)s::text)
  AND (%(revision)s::text IS NULL OR chart_identity = %(revision)s::text)
  AND (%(metadata)s::jsonb IS NULL OR metadata @> %(metadata)s::jsonb)
  AND (%(parent)s::text IS NULL OR parent_id = %(parent)s::text)
  AND (%(after)s::text IS NULL OR id > %(after)s::text)
ORDER BY id
LIMIT %(limit)s
