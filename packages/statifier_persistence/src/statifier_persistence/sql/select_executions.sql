-- The executions of a group commit (ADR 32), each with its step key: select_execution.sql
-- FOR NO KEY UPDATE for several rows at once (the step's lock: it lets the foreign-key
-- checks of rows referencing them through). The rows are locked in id order (a locking
-- clause applies after ORDER BY), so two groups, or a group and a single step, never wait
-- for each other in a cycle. An id without a row is missing from the result.
SELECT {columns},
    {position_columns},
    EXISTS (
        SELECT 1 FROM {schema}.statifier_step_keys AS k
        WHERE k.execution_id = e.id AND k.key = asked.step_key
    )
FROM {schema}.statifier_executions AS e
JOIN unnest(%(ids)b::text[], %(keys)b::text[]) AS asked (execution_id, step_key)
    ON asked.execution_id = e.id
ORDER BY e.id
FOR NO KEY UPDATE OF e
