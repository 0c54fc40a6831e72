-- Of the given executions, how many of those on the revision are not finished, by status.
SELECT status, count(*)
FROM {schema}.statifier_executions
WHERE id = ANY(%(ids)s::text[])
  AND chart_identity = %(identity)s
  AND status IN ('active', 'needs_migration')
GROUP BY status
