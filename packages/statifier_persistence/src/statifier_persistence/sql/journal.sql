-- The history entry and the notification of a statement that changed executions: the
-- `updated` CTE before it returns each row as changed, with `entry_kind` and
-- `entry_body` (null: write no entry). A fragment, not a statement.
journal AS (
    INSERT INTO {schema}.statifier_history (execution_id, seq, at, kind, entry)
    SELECT id, history_seq, updated_at, entry_kind, entry_body FROM updated
    WHERE entry_body IS NOT NULL
),
notified AS (
    SELECT pg_notify('statifier_executions', %(schema)s::text || ' ' || updated.id)
    FROM updated
    WHERE EXISTS (
        SELECT 1 FROM {schema}.statifier_watches AS w
        WHERE w.execution_id = updated.id AND w.until > now()
    )
)
