-- statifier_oban invocation indexes

-- One invocation job per (scope, invoke_id, macrostep), whatever its state.
CREATE UNIQUE INDEX IF NOT EXISTS {invoke_dedup_index}
ON {prefix}.oban_jobs ((args->>'scope'), (args->>'invoke_id'), (args->>'macrostep'))
WHERE worker = {invoke_worker};

-- One child start job per (scope, invoke_id, macrostep, index) of a fan-out.
CREATE UNIQUE INDEX IF NOT EXISTS {child_start_dedup_index}
ON {prefix}.oban_jobs ((args->>'scope'), (args->>'invoke_id'), (args->>'macrostep'), (args->>'index'))
WHERE worker = {child_start_worker};

-- A cancel by (scope, invoke_id) among pending invocation and child start jobs.
CREATE INDEX IF NOT EXISTS {invoke_pending_index}
ON {prefix}.oban_jobs ((args->>'scope'), (args->>'invoke_id'))
WHERE worker IN ({invoke_worker}, {child_start_worker}) AND state IN ({pending_states});
