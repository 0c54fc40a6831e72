-- The last entries of an execution's history before seq %(before)s, newest first (the
-- caller turns them around). Bounded as select_history.sql.
SELECT seq, at, kind,
    CASE WHEN octet_length(entry::text) <= %(max_entry)s THEN entry::text END,
    octet_length(entry::text)
FROM {schema}.statifier_history
WHERE execution_id = %(id)s AND seq < %(before)s
ORDER BY seq DESC
LIMIT %(limit)s
