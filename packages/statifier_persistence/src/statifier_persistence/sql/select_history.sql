-- A page of an execution's history: the entries after seq %(after)s, oldest first. An
-- entry over the bound is not transferred, only its size.
SELECT seq, at, kind,
    CASE WHEN octet_length(entry::text) <= %(max_entry)s THEN entry::text END,
    octet_length(entry::text)
FROM {schema}.statifier_history
WHERE execution_id = %(id)s AND seq > %(after)s
ORDER BY seq
LIMIT %(limit)s
