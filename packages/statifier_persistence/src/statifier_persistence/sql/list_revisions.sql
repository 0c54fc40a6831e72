-- Chart revisions, oldest first, with their executions counted by status; each filter
-- applies when its parameter is not null.
SELECT {revision_columns}
FROM {schema}.statifier_charts AS c
WHERE (%(name)s::text IS NULL OR c.name = %(name)s::text)
ORDER BY c.registered_at, c.identity
LIMIT %(limit)s
