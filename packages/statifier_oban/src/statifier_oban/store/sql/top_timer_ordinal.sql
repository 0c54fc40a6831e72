-- The highest ordinal among a scope's timer jobs, in any state (0 without any): a live
-- session resumed from an earlier position takes its next ordinals after it, so none of
-- them meets the row of a step that position does not hold (timer_indexes.sql: a timer is
-- unique by scope and ordinal for as long as its row exists). Ordinals above %(max)s, or
-- that are no JSON integers, are no ordinals a session wrote, and are not counted.
SELECT coalesce(max((args->'ordinal')::numeric), 0)
FROM {prefix}.oban_jobs
WHERE worker = {timer_worker} AND args->>'scope' = %(scope)s
  AND jsonb_typeof(args->'ordinal') = 'number'
  AND char_length(args->>'ordinal') <= %(max_digits)s
  AND (args->'ordinal')::numeric <= %(max)s
  AND (args->'ordinal')::numeric = trunc((args->'ordinal')::numeric)
