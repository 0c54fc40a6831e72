-- What a step (or create, or cancel) stores: the new position and status.
UPDATE {schema}.statifier_executions
SET position = %(position)s,
    status = %(status)s,
    failure = %(failure)s::jsonb,
    step_count = step_count + 1,
    updated_at = now()
WHERE id = %(id)s
RETURNING {columns}
