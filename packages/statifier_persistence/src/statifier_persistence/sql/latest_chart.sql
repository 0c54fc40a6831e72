-- The identity of the most recently registered revision of the chart named %(name)s.
SELECT identity
FROM {schema}.statifier_charts
WHERE name = %(name)s
ORDER BY registered_at DESC, identity DESC
LIMIT 1
