-- Park (needs_migration) or unpark (active) an execution locked by this transaction,
-- with its history entry and notification (journal.sql).
WITH updated AS (
    UPDATE {schema}.statifier_executions
    SET status = %(status)s, history_seq = history_seq + 1, updated_at = now()
    WHERE id = %(id)s
    RETURNING *, %(kind)s::text AS entry_kind, %(entry)s::json AS entry_body
),
{journal}
SELECT {columns}, (SELECT count(*) FROM notified) FROM updated
