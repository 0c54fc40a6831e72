-- statifier_persistence: charts invoked as child executions (<invoke type="scxml">) and the
-- messages between a parent and its children (idempotent: safe to run again). {schema} is
-- the configured schema.

-- Where an execution sits in its tree of invoked charts: the top execution of the tree
-- (null on a top, which is its own) and how far below it; bounds the tree as live
-- sessions' trees are bounded. invoke_context is the caller context of the <invoke> that
-- started a child (JSON), which the parent's done.invoke carries.
ALTER TABLE {schema}.statifier_executions ADD COLUMN IF NOT EXISTS tree_root text;

ALTER TABLE {schema}.statifier_executions
    ADD COLUMN IF NOT EXISTS tree_depth integer NOT NULL DEFAULT 0;

ALTER TABLE {schema}.statifier_executions ADD COLUMN IF NOT EXISTS invoke_context jsonb;

-- the live executions of a tree (counted before it grows)
CREATE INDEX IF NOT EXISTS statifier_executions_live_by_tree
    ON {schema}.statifier_executions (tree_root)
    WHERE tree_root IS NOT NULL AND status IN ('active', 'needs_migration');

-- What a chart revision's <invoke type="scxml" src="NAME"> starts: the revision of the
-- chart registered as NAME that was newest when the link was made (when the revision was
-- registered, for a src written in the chart; at its first use, for a srcexpr's value).
-- A link never changes: the revision pins what it invokes, as it pins its states.
CREATE TABLE IF NOT EXISTS {schema}.statifier_chart_links (
    chart_identity text NOT NULL REFERENCES {schema}.statifier_charts (identity),
    src text NOT NULL,
    target_identity text NOT NULL REFERENCES {schema}.statifier_charts (identity),
    linked_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT statifier_chart_links_key PRIMARY KEY (chart_identity, src)
);

-- the revisions that invoke a revision (they pin it against retirement)
CREATE INDEX IF NOT EXISTS statifier_chart_links_by_target
    ON {schema}.statifier_chart_links (target_identity);

-- A mailbox per execution: events, answers and cancels between a parent and its invoked
-- children, each written by the sender's step (with a job that delivers it) and deleted
-- by the receiver's step that applies it, lowest id first, so each arrives once and in
-- the order it was sent. The receiver has no reference on purpose: the check would lock
-- the receiving row (FOR KEY SHARE) while a step of it holds it, and a parent and a child
-- sending to each other at once would deadlock. The sender's reference is free: the
-- sender's own step writes the row.
CREATE TABLE IF NOT EXISTS {schema}.statifier_messages (
    id bigserial PRIMARY KEY,
    execution_id text NOT NULL,
    sender_id text NOT NULL
        REFERENCES {schema}.statifier_executions (id) ON DELETE CASCADE,
    invoke_id text NOT NULL,
    kind text NOT NULL,
    body jsonb,
    sent_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT statifier_messages_kind CHECK (
        kind IN ('to_parent', 'done', 'to_child', 'cancel')
    )
);

-- an execution's mailbox, oldest first
CREATE INDEX IF NOT EXISTS statifier_messages_by_receiver
    ON {schema}.statifier_messages (execution_id, id);

-- a sender's messages (its deletion cascades)
CREATE INDEX IF NOT EXISTS statifier_messages_by_sender
    ON {schema}.statifier_messages (sender_id);
