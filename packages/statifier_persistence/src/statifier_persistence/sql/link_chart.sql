-- Link <invoke src="%(src)s"> of revision %(identity)s to the newest revision registered
-- under the name %(src)s that is not retired; an existing link is left as it is. Returns
-- the target when a link was made.
INSERT INTO {schema}.statifier_chart_links (chart_identity, src, target_identity)
SELECT %(identity)s, %(src)s, c.identity
FROM {schema}.statifier_charts AS c
WHERE c.name = %(src)s AND c.retired_at IS NULL
ORDER BY c.registered_at DESC, c.identity DESC
LIMIT 1
ON CONFLICT ON CONSTRAINT statifier_chart_links_key DO NOTHING
RETURNING target_identity
