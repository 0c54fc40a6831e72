-- A fan-out, locked by this transaction (a child start holds it while it creates a child).
SELECT child_count, policy, chart_identity, state
FROM {schema}.statifier_fan_outs
WHERE parent_id = %(parent_id)s AND invoke_id = %(invoke_id)s AND generation = %(generation)s
FOR UPDATE
