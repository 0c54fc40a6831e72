-- The children of a fan-out that have not finished yet, in index order.
SELECT child_id
FROM {schema}.statifier_fan_out_children
WHERE parent_id = %(parent_id)s AND invoke_id = %(invoke_id)s AND generation = %(generation)s
  AND finished_status IS NULL
ORDER BY child_index
LIMIT %(limit)s
