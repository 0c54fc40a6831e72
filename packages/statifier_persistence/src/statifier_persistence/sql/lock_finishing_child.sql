-- A child that became terminal and is not counted yet, with its fan-out; both rows are
-- locked by this transaction, so children finishing at once are counted one at a time.
SELECT c.parent_id, c.invoke_id, c.generation, c.child_index,
       f.child_count, f.policy, f.failed_states, f.finished, f.state
FROM {schema}.statifier_fan_out_children AS c
JOIN {schema}.statifier_fan_outs AS f USING (parent_id, invoke_id, generation)
WHERE c.child_id = %(child_id)s AND c.finished_status IS NULL
FOR UPDATE
