-- Open fan-outs whose children run revision %(identity)s: each may still create children.
SELECT count(*)
FROM {schema}.statifier_fan_outs
WHERE chart_identity = %(identity)s AND state = 'open'
