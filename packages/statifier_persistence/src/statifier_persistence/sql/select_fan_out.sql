-- A fan-out as it stands (not locked); caller_context only within %(max_context)s bytes.
SELECT state, policy, child_count, failed_index, octet_length(caller_context),
       CASE WHEN octet_length(caller_context) <= %(max_context)s THEN caller_context END
FROM {schema}.statifier_fan_outs
WHERE parent_id = %(parent_id)s AND invoke_id = %(invoke_id)s AND generation = %(generation)s
