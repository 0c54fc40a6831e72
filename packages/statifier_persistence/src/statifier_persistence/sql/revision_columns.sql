c.identity, c.name, c.version, c.source_identity, c.registered_at, c.retired_at,
COALESCE((
    SELECT jsonb_object_agg(counted.status, counted.n)::text
    FROM (
        SELECT e.status, count(*) AS n
        FROM {schema}.statifier_executions AS e
        WHERE e.chart_identity = c.identity
        GROUP BY e.status
    ) AS counted
), '{}')
