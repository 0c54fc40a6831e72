-- What steps (or a create, or a cancel) store, in one statement: for each execution (one,
-- or several stepped in one transaction by a group commit, ADR 32) its new position
-- with its counters, status, what it has armed, and step count; the step's key when it
-- has one; the history entry when history is on (a null entry: off); and a notification
-- of the commit when someone watches the execution (journal.sql). The rows to store come
-- from `stepped`: stepped_rows.sql (arrays, for a group) or stepped_row.sql (one step).
-- A key is inserted plainly: a key a concurrent step applied first (its commit came while
-- this step waited for the row lock, after the locked read's snapshot) fails the whole
-- statement with a unique violation of statifier_step_keys_unique; the caller rolls back
-- and steps again, and the locked read then answers "already applied".
-- It returns what the store changed of each row (the rest is as the locked read, or the
-- insert, returned it: the row stayed locked since): id, status, step count, update time
-- and history sequence; the last column counts the notifications sent (it makes the
-- notifying CTE run).
WITH stepped AS (
    {stepped}
),
updated AS (
    UPDATE {schema}.statifier_executions AS e
    SET position = s.position,
        position_macrostep = s.macrostep,
        position_round = s.round,
        armed = s.armed::jsonb,
        status = s.status,
        failure = s.failure::jsonb,
        outcome = s.outcome::jsonb,
        step_count = e.step_count + 1,
        history_seq = e.history_seq + 1,
        updated_at = now()
    FROM stepped AS s
    WHERE e.id = s.id
    RETURNING e.*, s.key AS step_key, s.kind AS entry_kind, s.entry::json AS entry_body
),
keyed AS (
    INSERT INTO {schema}.statifier_step_keys (execution_id, key, step_count)
    SELECT id, step_key, step_count FROM updated
    WHERE step_key IS NOT NULL
),
{journal}
SELECT id, status, step_count, updated_at, history_seq, (SELECT count(*) FROM notified)
FROM updated
