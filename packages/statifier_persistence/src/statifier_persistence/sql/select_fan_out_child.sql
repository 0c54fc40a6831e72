-- The child execution started for one index of a fan-out, if there is one.
SELECT child_id
FROM {schema}.statifier_fan_out_children
WHERE parent_id = %(parent_id)s AND invoke_id = %(invoke_id)s AND generation = %(generation)s
  AND child_index = %(index)s
