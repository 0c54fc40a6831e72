-- statifier_persistence: fan-outs, one invocation answered on behalf of N child executions
-- (idempotent: safe to run again). {schema} is the configured schema.

-- One row per fan-out: one generation of a parent's invocation (the macrostep that
-- started it, so a re-entered state's fan-out is a new row). Created by the first child
-- start; `state` leaves 'open' exactly once: 'settled' when the answer is decided (every
-- child finished, or the first failure under first_error), 'abandoned' when the parent
-- stopped the invocation first.
CREATE TABLE IF NOT EXISTS {schema}.statifier_fan_outs (
    parent_id text NOT NULL
        REFERENCES {schema}.statifier_executions (id) ON DELETE CASCADE,
    invoke_id text NOT NULL,
    generation bigint NOT NULL,
    child_count integer NOT NULL,
    policy text NOT NULL,
    chart_identity text NOT NULL REFERENCES {schema}.statifier_charts (identity),
    failed_states text[] NOT NULL DEFAULT '{}',
    caller_context text,
    finished integer NOT NULL DEFAULT 0,
    state text NOT NULL DEFAULT 'open',
    failed_index integer,
    created_at timestamptz NOT NULL DEFAULT now(),
    settled_at timestamptz,
    CONSTRAINT statifier_fan_outs_key PRIMARY KEY (parent_id, invoke_id, generation),
    CONSTRAINT statifier_fan_outs_count CHECK (
        child_count > 0 AND finished BETWEEN 0 AND child_count
    ),
    CONSTRAINT statifier_fan_outs_policy CHECK (policy IN ('all', 'first_error')),
    CONSTRAINT statifier_fan_outs_state CHECK (state IN ('open', 'settled', 'abandoned'))
);

-- One row per child of a fan-out, written in the transaction that creates the child (the
-- reference to the child is checked at commit, so the row can come first). `finished_status`
-- is set once, when the child first becomes terminal: that is what counts it.
CREATE TABLE IF NOT EXISTS {schema}.statifier_fan_out_children (
    child_id text PRIMARY KEY
        REFERENCES {schema}.statifier_executions (id) ON DELETE CASCADE
        DEFERRABLE INITIALLY DEFERRED,
    parent_id text NOT NULL,
    invoke_id text NOT NULL,
    generation bigint NOT NULL,
    child_index integer NOT NULL,
    finished_status text,
    failed boolean,
    finished_at timestamptz,
    CONSTRAINT statifier_fan_out_children_index UNIQUE (parent_id, invoke_id, generation, child_index),
    CONSTRAINT statifier_fan_out_children_fan_out FOREIGN KEY (parent_id, invoke_id, generation)
        REFERENCES {schema}.statifier_fan_outs (parent_id, invoke_id, generation)
        ON DELETE CASCADE,
    CONSTRAINT statifier_fan_out_children_finished CHECK (
        (finished_status IS NULL) = (failed IS NULL)
        AND finished_status IN ('completed', 'failed', 'cancelled')
    )
);

-- the open fan-outs of a chart revision (they pin it against retirement)
CREATE INDEX IF NOT EXISTS statifier_fan_outs_open_by_chart
    ON {schema}.statifier_fan_outs (chart_identity)
    WHERE state = 'open';
