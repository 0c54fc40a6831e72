-- One batch of retention by count: delete up to %(batch)s entries that are not among the
-- last %(keep)s of their execution, walking executions by id from %(from)s (the caller
-- passes the last id the previous batch deleted from, and stops when a batch deletes
-- fewer than %(batch)s). One transaction per batch.
WITH doomed AS (
    SELECT h.execution_id, h.seq
    FROM {schema}.statifier_history AS h
    JOIN {schema}.statifier_executions AS e ON e.id = h.execution_id
    WHERE h.execution_id >= %(from)s
      AND h.seq <= e.history_seq - %(keep)s
    ORDER BY h.execution_id, h.seq
    LIMIT %(batch)s
)
DELETE FROM {schema}.statifier_history AS h
USING doomed
WHERE h.execution_id = doomed.execution_id AND h.seq = doomed.seq
RETURNING h.execution_id
