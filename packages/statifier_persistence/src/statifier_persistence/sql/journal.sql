-- The history entry and the notification of a statement that changed an execution
-- (the `updated` CTE before it returns the row as changed). A fragment, not a statement.
journal AS (
    INSERT INTO {schema}.statifier_history (execution_id, seq, at, kind, entry)
    SELECT id, history_seq, updated_at, %(kind)s::text, %(entry)s::json FROM updated
    WHERE %(entry)s::json IS NOT NULL
),
notified AS (
    SELECT pg_notify('statifier_executions', %(schema)s::text || ' ' || updated.id)
    FROM updated
    WHERE EXISTS (
        SELECT 1 FROM {schema}.statifier_watches AS w
        WHERE w.execution_id = updated.id AND w.until > now()
    )
)
