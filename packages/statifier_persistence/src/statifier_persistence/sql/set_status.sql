-- Park (needs_migration) or unpark (active) an execution locked by this transaction.
UPDATE {schema}.statifier_executions
SET status = %(status)s, updated_at = now()
WHERE id = %(id)s
RETURNING {columns}
