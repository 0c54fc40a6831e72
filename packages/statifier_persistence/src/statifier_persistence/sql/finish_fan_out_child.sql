-- Count a finished child (once: its finished_status is set) and store the fan-out's state.
WITH counted AS (
    UPDATE {schema}.statifier_fan_out_children
    SET finished_status = %(status)s, failed = %(failed)s, finished_at = now()
    WHERE child_id = %(child_id)s AND finished_status IS NULL
    RETURNING parent_id, invoke_id, generation
)
UPDATE {schema}.statifier_fan_outs AS f
SET finished = f.finished + 1,
    state = %(state)s,
    failed_index = coalesce(f.failed_index, %(failed_index)s),
    settled_at = CASE WHEN %(state)s <> 'open' THEN coalesce(f.settled_at, now()) END
FROM counted
WHERE (f.parent_id, f.invoke_id, f.generation)
    = (counted.parent_id, counted.invoke_id, counted.generation)
RETURNING f.finished
