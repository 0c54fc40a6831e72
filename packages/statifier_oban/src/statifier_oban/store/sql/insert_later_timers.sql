-- insert_timers.sql for a batch none of whose timers is due within the announce horizon
-- (the caller checked every delay_ms): the same rows and metas, the same ON CONFLICT and
-- the same result, without the announcement, whose common table expression made
-- PostgreSQL keep and scan the inserted rows twice.
INSERT INTO {prefix}.oban_jobs (args, meta, queue, worker, state, scheduled_at)
SELECT args, %(meta)s::jsonb || coalesce(%(metas)s::jsonb -> (n - 1)::int, '{}'),
       %(queue)s, {timer_worker}, 'scheduled',
       timezone('UTC', now()) + (args->>'delay_ms')::bigint * interval '1 millisecond'
FROM jsonb_array_elements(%(args)s::jsonb) WITH ORDINALITY AS timers(args, n)
ON CONFLICT ((args->>'scope'), (args->>'ordinal')) WHERE worker = {timer_worker} DO NOTHING
RETURNING id, scheduled_at, inserted_at, (args->>'ordinal')::int AS ordinal,
          args->>'scope' AS scope
