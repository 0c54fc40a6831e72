-- Revisions that are not retired and invoke revision %(identity)s (<invoke src> linked to
-- it): they may still start children on it.
SELECT count(*)
FROM {schema}.statifier_chart_links AS l
JOIN {schema}.statifier_charts AS c ON c.identity = l.chart_identity
WHERE l.target_identity = %(identity)s
  AND l.chart_identity <> %(identity)s
  AND c.retired_at IS NULL
