-- Where execution %(id)s sits in its tree of invoked charts: the tree's top (null: it is
-- the top) and its depth below it.
SELECT tree_root, tree_depth
FROM {schema}.statifier_executions
WHERE id = %(id)s
