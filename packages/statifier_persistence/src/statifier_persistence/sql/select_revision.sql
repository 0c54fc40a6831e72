-- One chart revision with its executions counted by status, by its identity or else by
-- the identity of its source bytes ({lock}: FOR SHARE before taking executions onto it,
-- FOR UPDATE to retire it).
SELECT {revision_columns}
FROM {schema}.statifier_charts AS c
WHERE c.identity = (
    SELECT identity FROM {schema}.statifier_charts
    WHERE identity = %(identity)s OR source_identity = %(identity)s
    ORDER BY identity = %(identity)s DESC
    LIMIT 1
)
{lock}
