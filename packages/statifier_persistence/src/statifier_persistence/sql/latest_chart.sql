-- The identity of the most recently registered revision of the chart named %(name)s that
-- is not retired.
SELECT identity
FROM {schema}.statifier_charts
WHERE name = %(name)s AND retired_at IS NULL
ORDER BY registered_at DESC, identity DESC
LIMIT 1
