-- The revision that revision %(identity)s starts for <invoke src="%(src)s">, if linked.
SELECT target_identity
FROM {schema}.statifier_chart_links
WHERE chart_identity = %(identity)s AND src = %(src)s
