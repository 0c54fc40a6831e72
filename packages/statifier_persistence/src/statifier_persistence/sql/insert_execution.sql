-- A new execution; its position is written by the same transaction once the initial
-- drive has run. A taken id inserts nothing (ExecutionExists). A child of an invoked chart
-- names the top of its tree, its depth below it and its <invoke>'s caller context.
INSERT INTO {schema}.statifier_executions
    (id, chart_identity, chart_name, chart_version, status, position, metadata,
     parent_id, parent_invoke_id, child_index, tree_root, tree_depth, invoke_context)
VALUES
    (%(id)s, %(identity)s, %(name)s, %(version)s, 'active', '\x'::bytea, %(metadata)s::jsonb,
     %(parent_id)s, %(parent_invoke_id)s, %(child_index)s, %(tree_root)s, %(tree_depth)s,
     %(invoke_context)s::jsonb)
ON CONFLICT (id) DO NOTHING
RETURNING {columns}
