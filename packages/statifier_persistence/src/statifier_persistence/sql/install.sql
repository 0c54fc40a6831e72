-- statifier_persistence: the tables of durable executions (idempotent: safe to run again).
-- {schema} is the configured schema (by default public, beside oban's tables).

-- Every chart an execution runs, by identity, so any node can compile it. A new revision
-- of a chart is a new row; a row is only ever updated to retire it (see the end).
CREATE TABLE IF NOT EXISTS {schema}.statifier_charts (
    identity text PRIMARY KEY,
    name text,
    version text,
    source bytea NOT NULL,
    resolved_sources jsonb NOT NULL DEFAULT '{}'::jsonb,
    registered_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT statifier_charts_resolved_object CHECK (jsonb_typeof(resolved_sources) = 'object')
);

CREATE INDEX IF NOT EXISTS statifier_charts_by_name
    ON {schema}.statifier_charts (name, registered_at);

-- One row per execution: its status and its position (statifier.core.position bytes).
CREATE TABLE IF NOT EXISTS {schema}.statifier_executions (
    id text PRIMARY KEY,
    chart_identity text NOT NULL REFERENCES {schema}.statifier_charts (identity),
    chart_name text,
    chart_version text,
    status text NOT NULL DEFAULT 'active',
    position bytea NOT NULL,
    metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
    parent_id text REFERENCES {schema}.statifier_executions (id),
    parent_invoke_id text,
    child_index integer,
    failure jsonb,
    outcome jsonb,
    step_count bigint NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT statifier_executions_status CHECK (
        status IN ('active', 'completed', 'failed', 'cancelled', 'needs_migration')
    ),
    CONSTRAINT statifier_executions_parent CHECK (
        (parent_id IS NULL) = (parent_invoke_id IS NULL)
        AND (child_index IS NULL OR parent_id IS NOT NULL)
    ),
    CONSTRAINT statifier_executions_metadata_object CHECK (jsonb_typeof(metadata) = 'object')
) WITH (fillfactor = 80);  -- room on each page for the HOT update every step makes

-- list by status and chart (paged by id)
CREATE INDEX IF NOT EXISTS statifier_executions_by_status
    ON {schema}.statifier_executions (status, chart_name, id);

-- which executions run a chart revision
CREATE INDEX IF NOT EXISTS statifier_executions_by_chart
    ON {schema}.statifier_executions (chart_identity);

-- list by metadata containment (metadata @> '{"customer": "c1"}')
CREATE INDEX IF NOT EXISTS statifier_executions_by_metadata
    ON {schema}.statifier_executions USING gin (metadata jsonb_path_ops);

-- the children of an invocation, in index order
CREATE INDEX IF NOT EXISTS statifier_executions_by_parent
    ON {schema}.statifier_executions (parent_id, parent_invoke_id, child_index)
    WHERE parent_id IS NOT NULL;

-- Exactly-once: a step given a key records it in its own transaction; the same key
-- again is answered "already applied" without driving anything.
CREATE TABLE IF NOT EXISTS {schema}.statifier_step_keys (
    execution_id text NOT NULL
        REFERENCES {schema}.statifier_executions (id) ON DELETE CASCADE,
    key text NOT NULL,
    step_count bigint NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT statifier_step_keys_unique PRIMARY KEY (execution_id, key)
);

-- Chart revisions (ADR 16). source_identity is the identity of the source bytes, which
-- charts had before canonical identities: executions and positions written under it
-- find their chart by it (null on rows registered under it, whose identity is it).
-- A retired revision takes no new execution and no migration; its row stays, for the
-- finished executions that name it.
ALTER TABLE {schema}.statifier_charts ADD COLUMN IF NOT EXISTS source_identity text;

ALTER TABLE {schema}.statifier_charts ADD COLUMN IF NOT EXISTS retired_at timestamptz;

CREATE INDEX IF NOT EXISTS statifier_charts_by_source_identity
    ON {schema}.statifier_charts (source_identity)
    WHERE source_identity IS NOT NULL;

-- What each execution has armed (issue 18, ADR 12): its pending delayed sends by send id
-- and ordinal, and its live invocations' generations, written by the step that arms or
-- cancels them, so a timer job cancelled while it ran is never driven. Null on rows
-- stored before executions kept it (their earlier timers fire as they always did).
ALTER TABLE {schema}.statifier_executions ADD COLUMN IF NOT EXISTS armed jsonb;

-- The counters of the stored position (macrostep, round), written with it: a position
-- older than its row says is refused (StalePosition). Null on rows stored before.
ALTER TABLE {schema}.statifier_executions ADD COLUMN IF NOT EXISTS position_macrostep bigint;

ALTER TABLE {schema}.statifier_executions ADD COLUMN IF NOT EXISTS position_round bigint;
