-- statifier_persistence: every execution's history, and who waits on which execution
-- (idempotent: safe to run again). {schema} is the configured schema. ADR 25.

-- history_seq counts the transactions that changed an execution (steps, create, cancel,
-- migrate, park, unpark); each writes its history entry under the new count.
ALTER TABLE {schema}.statifier_executions
    ADD COLUMN IF NOT EXISTS history_seq bigint NOT NULL DEFAULT 0;

-- One row per history entry, append-only, written by the transaction it describes.
-- `entry` is statifier_persistence.history.HistoryEntry.to_json() without the row's
-- columns (execution_id, seq, at), the derived due times of armed timers and the fields
-- at their defaults. `json`, not `jsonb`: stored as written (smaller, cheaper to insert);
-- its -> and ->> operators still serve an operator's queries.
CREATE TABLE IF NOT EXISTS {schema}.statifier_history (
    execution_id text NOT NULL
        REFERENCES {schema}.statifier_executions (id) ON DELETE CASCADE,
    seq bigint NOT NULL,
    at timestamptz NOT NULL DEFAULT now(),
    kind text NOT NULL,
    entry json NOT NULL,
    CONSTRAINT statifier_history_key PRIMARY KEY (execution_id, seq),
    CONSTRAINT statifier_history_entry_object CHECK (json_typeof(entry) = 'object')
);

-- pruning by age: entries are appended in time order, so a BRIN index (a few pages for
-- millions of rows, next to nothing per insert) finds the old ones
CREATE INDEX IF NOT EXISTS statifier_history_by_time
    ON {schema}.statifier_history USING brin (at);

-- Who waits for a change of an execution (Executions.wait, history --follow): a step
-- of a watched execution sends a NOTIFY on commit (channel statifier_executions, payload
-- '<schema> <execution id>'); no other step does, so an unwatched step never takes the
-- lock a notifying commit takes. A watch expires at `until` (a waiter that died).
CREATE TABLE IF NOT EXISTS {schema}.statifier_watches (
    execution_id text NOT NULL,
    watcher uuid NOT NULL,
    until timestamptz NOT NULL,
    CONSTRAINT statifier_watches_key PRIMARY KEY (execution_id, watcher)
);
