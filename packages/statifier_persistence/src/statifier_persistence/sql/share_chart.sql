-- A registered revision about to take a new execution: its resolved src documents (within
-- the bound) and whether it is retired, locked against retirement until this transaction
-- ends (FOR SHARE: creates do not wait for each other, a retire waits for them).
SELECT
    CASE WHEN octet_length(resolved_sources::text) <= %(max_source)s
         THEN resolved_sources::text END,
    retired_at IS NOT NULL
FROM {schema}.statifier_charts
WHERE identity = %(identity)s
FOR SHARE
