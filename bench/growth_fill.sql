-- bench/growth.py: the bulk rows of a database at scale, cloned from one template execution
-- that the API created (its row, its pending timer job, its history entries). Each
-- statement fills the executions numbered %(start)s to %(stop)s - 1, named
-- fill_00000000, fill_00000001...; the template's id is %(template)s. The clones are never
-- loaded (their positions name the template's session); the probes the bench measures
-- are executions of their own, created through the API.

-- name: executions
-- One row per execution, as a timer-driven execution looks after its history's changes:
-- the template's position, armed list and counters, a customer in its metadata.
INSERT INTO statifier_executions
    (id, chart_identity, chart_name, chart_version, status, position, metadata, step_count,
     created_at, updated_at, armed, position_macrostep, position_round, history_seq)
SELECT 'fill_' || lpad(i::text, 8, '0'), t.chart_identity, t.chart_name, t.chart_version,
       t.status, t.position, jsonb_build_object('customer', 'c' || (i %% 10000)),
       %(history)s - 1, t.created_at, t.updated_at, t.armed, t.position_macrostep,
       t.position_round, %(history)s
FROM statifier_executions AS t, generate_series(%(start)s, %(stop)s - 1) AS i
WHERE t.id = %(template)s;

-- name: timers
-- Each execution's pending timer: the template's pending job row with its own scope, due
-- over the next day (none falls due while the bench runs).
INSERT INTO oban_jobs
    (state, queue, worker, args, meta, tags, errors, attempt, max_attempts, priority,
     scheduled_at, inserted_at)
SELECT j.state, j.queue, j.worker,
       jsonb_set(j.args, '{scope}', to_jsonb('fill_' || lpad(i::text, 8, '0'))),
       j.meta, j.tags, j.errors, j.attempt, j.max_attempts, j.priority,
       timezone('UTC', now()) + interval '1 hour' + (i %% 86400) * interval '1 second',
       j.inserted_at
FROM oban_jobs AS j, generate_series(%(start)s, %(stop)s - 1) AS i
WHERE j.id = %(job)s;

-- name: history
-- The history entries of each execution: the template's creation entry, then its step entry
-- again and again, an hour apart.
INSERT INTO statifier_history (execution_id, seq, at, kind, entry)
SELECT 'fill_' || lpad(i::text, 8, '0'), s.seq,
       now() - (%(history)s - s.seq) * interval '1 hour',
       CASE WHEN s.seq = 1 THEN created.kind ELSE step.kind END,
       CASE WHEN s.seq = 1 THEN created.entry ELSE step.entry END
FROM generate_series(%(start)s, %(stop)s - 1) AS i,
     generate_series(1, %(history)s) AS s(seq),
     statifier_history AS created,
     statifier_history AS step
WHERE created.execution_id = %(template)s AND created.seq = 1
  AND step.execution_id = %(template)s AND step.seq = 2;

-- name: keys
-- The step keys of the timer jobs that made those entries (one per step after creation).
INSERT INTO statifier_step_keys (execution_id, key, step_count, applied_at)
SELECT 'fill_' || lpad(i::text, 8, '0'), 'job:' || (i::bigint * 64 + s.n), s.n, now()
FROM generate_series(%(start)s, %(stop)s - 1) AS i,
     generate_series(1, %(history)s - 1) AS s(n);
