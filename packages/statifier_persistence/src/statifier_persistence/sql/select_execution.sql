-- One execution with its position ({lock}: FOR NO KEY UPDATE when stepping), the position's
-- counters and what the execution has armed as the row records them, and whether the
-- step key %(key)s was applied to it (a keyless read asks about the empty key, which no
-- step has: one plan serves both, see Executions._read). A position, an armed list or
-- metadata over the configured bounds is not transferred, only its size.
SELECT {columns},
    {position_columns},
    EXISTS (
        SELECT 1 FROM {schema}.statifier_step_keys AS k
        WHERE k.execution_id = e.id AND k.key = %(key)s::text
    )
FROM {schema}.statifier_executions AS e
WHERE id = %(id)s
{lock}
