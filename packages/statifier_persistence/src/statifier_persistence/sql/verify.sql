-- The names of our tables present in the schema (a check of names, not definitions).
SELECT c.relname
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s
  AND c.relkind IN ('r', 'p')
  AND c.relname = ANY(%(tables)s)
