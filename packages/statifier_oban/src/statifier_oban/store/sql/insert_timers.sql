-- Store timer jobs in one statement: a drive's, or the drives of several executions
-- stepped in one transaction (a group commit, ADR 32). Every (scope, ordinal) that
-- already has a row is skipped; a new row is 'scheduled' in the given queue. The args
-- come as one jsonb array (one parameter: no array literal to escape element by
-- element); each timer's fire time is now() plus its args' delay_ms. Returns the rows
-- inserted (id, fire time, insert time, ordinal and scope); find_timers.sql reads the
-- ones that conflicted. If one of the new timers is due within the announce horizon,
-- the earliest is announced to the prompt stagers (statifier_oban.latency), once per
-- statement, when the caller commits.
WITH inserted AS (
    INSERT INTO {prefix}.oban_jobs (args, meta, queue, worker, state, scheduled_at)
    SELECT args, %(meta)s::jsonb || coalesce(%(metas)s::jsonb -> (n - 1)::int, '{}'),
           %(queue)s, {timer_worker}, 'scheduled',
           timezone('UTC', now()) + (args->>'delay_ms')::bigint * interval '1 millisecond'
    FROM jsonb_array_elements(%(args)s::jsonb) WITH ORDINALITY AS timers(args, n)
    ON CONFLICT ((args->>'scope'), (args->>'ordinal')) WHERE worker = {timer_worker} DO NOTHING
    RETURNING id, scheduled_at, inserted_at, (args->>'ordinal')::int AS ordinal,
              args->>'scope' AS scope
),
announced AS (
    SELECT pg_notify(%(due_channel)s, json_build_object(
               'queue', %(queue)s::text, 'at', extract(epoch FROM min(scheduled_at)))::text)
    FROM inserted
    HAVING min(scheduled_at) < timezone('UTC', now())
                               + {announce_horizon_ms} * interval '1 millisecond'
)
SELECT id, scheduled_at, inserted_at, ordinal, scope
FROM inserted
WHERE (SELECT count(*) FROM announced) >= 0
