-- The live executions of the tree topped by %(root)s, the top included, up to %(limit)s.
SELECT count(*) FROM (
    SELECT 1 FROM {schema}.statifier_executions
    WHERE (tree_root = %(root)s OR id = %(root)s)
      AND status IN ('active', 'needs_migration')
    LIMIT %(limit)s
) AS live
