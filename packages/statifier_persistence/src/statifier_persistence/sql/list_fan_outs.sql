-- The fan-outs of a parent execution, oldest generation first (at most %(limit)s).
SELECT invoke_id, generation, child_count, finished, policy, state, chart_identity
FROM {schema}.statifier_fan_outs
WHERE parent_id = %(parent_id)s
ORDER BY generation, invoke_id
LIMIT %(limit)s
