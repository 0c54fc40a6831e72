-- What a migration stores: the execution now runs the new revision, from the imported
-- position (with its counters); it counts as a step. What it armed stays armed. With its
-- history entry and notification (journal.sql).
WITH updated AS (
    UPDATE {schema}.statifier_executions
    SET chart_identity = %(identity)s,
        chart_name = %(name)s,
        chart_version = %(version)s,
        position = %(position)s,
        position_macrostep = %(macrostep)s,
        position_round = %(round)s,
        step_count = step_count + 1,
        history_seq = history_seq + 1,
        updated_at = now()
    WHERE id = %(id)s
    RETURNING *, %(kind)s::text AS entry_kind, %(entry)s::json AS entry_body
),
{journal}
SELECT {columns}, (SELECT count(*) FROM notified) FROM updated
