-- Whether any timer row of a scope remains, in whatever state (statifier_oban.timers
-- ._schedule.timer_rows_left). A timer is unique by (scope, ordinal) for as long as its row
-- exists, and a new execution's ordinals start at 1 again: an execution created under the
-- id of an earlier one whose timer rows remain would see its timers merged with those rows
-- (never stored) and their pending ones firing into it. One probe of the timer dedup index.
SELECT EXISTS (
    SELECT 1 FROM {prefix}.oban_jobs
    WHERE worker = {timer_worker} AND args->>'scope' = %(scope)s
)
