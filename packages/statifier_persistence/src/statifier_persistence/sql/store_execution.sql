-- What a step (or create, or cancel) stores, in one statement: the new position with its
-- counters, status, what the execution has armed, and step count, the step's key when it
-- has one (the primary key makes it unique), the history entry when history is on
-- (%(entry)s null: off), and a notification of the commit when someone watches the
-- execution (see history_tables.sql).
-- The last columns count the key rows inserted (0 for a keyed step means a concurrent
-- step applied the same key first: the caller rolls back and answers "already applied")
-- and the notifications sent.
WITH updated AS (
    UPDATE {schema}.statifier_executions
    SET position = %(position)s,
        position_macrostep = %(macrostep)s,
        position_round = %(round)s,
        armed = %(armed)s::jsonb,
        status = %(status)s,
        failure = %(failure)s::jsonb,
        outcome = %(outcome)s::jsonb,
        step_count = step_count + 1,
        history_seq = history_seq + 1,
        updated_at = now()
    WHERE id = %(id)s
    RETURNING *
),
keyed AS (
    INSERT INTO {schema}.statifier_step_keys (execution_id, key, step_count)
    SELECT id, %(key)s::text, step_count FROM updated
    WHERE %(key)s::text IS NOT NULL
    ON CONFLICT ON CONSTRAINT statifier_step_keys_unique DO NOTHING
    RETURNING 1
),
{journal}
SELECT {columns}, (SELECT count(*) FROM keyed), (SELECT count(*) FROM notified) FROM updated
