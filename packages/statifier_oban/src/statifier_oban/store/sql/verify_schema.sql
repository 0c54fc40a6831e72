-- Which of oban's tables (and the execution tables, when asked) and our (valid) indexes on
-- oban_jobs exist in a schema.
SELECT c.relname
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
LEFT JOIN pg_catalog.pg_index AS i ON i.indexrelid = c.oid
LEFT JOIN pg_catalog.pg_class AS t ON t.oid = i.indrelid
WHERE n.nspname = %(prefix)s
  AND (
    (c.relkind IN ('r', 'p') AND c.relname = ANY(%(tables)s))
    OR (c.relkind = 'i' AND i.indisvalid AND t.relname = 'oban_jobs'
        AND c.relname = ANY(%(indexes)s))
  )
