-- A new execution; its position is written by the same transaction once the initial
-- drive has run. A taken id inserts nothing (ExecutionExists).
INSERT INTO {schema}.statifier_executions
    (id, chart_identity, chart_name, chart_version, status, position, metadata,
     parent_id, parent_invoke_id, child_index)
VALUES
    (%(id)s, %(identity)s, %(name)s, %(version)s, 'active', '\x'::bytea, %(metadata)s::jsonb,
     %(parent_id)s, %(parent_invoke_id)s, %(child_index)s)
ON CONFLICT (id) DO NOTHING
RETURNING {columns}
