-- statifier_oban timer indexes

-- One timer row per (scope, ordinal) for as long as the row exists, whatever its state.
CREATE UNIQUE INDEX IF NOT EXISTS {timer_dedup_index}
ON {prefix}.oban_jobs ((args->>'scope'), (args->>'ordinal'))
WHERE worker = {timer_worker};

-- A cancel by (scope, send_id) among pending timer rows is an index scan.
CREATE INDEX IF NOT EXISTS {timer_pending_index}
ON {prefix}.oban_jobs ((args->>'scope'), (args->>'send_id'))
WHERE worker = {timer_worker} AND state IN ({pending_states});
