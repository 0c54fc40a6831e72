-- How many executions there are in each status; the filters are those of list_executions.
SELECT status, count(*)
FROM {schema}.statifier_executions
WHERE (%(chart)s::text IS NULL OR chart_name = %(chart)s::text)
  AND (%(revision)s::text IS NULL OR chart_identity = %(revision)s::text)
  AND (%(metadata)s::jsonb IS NULL OR metadata @> %(metadata)s::jsonb)
GROUP BY status
