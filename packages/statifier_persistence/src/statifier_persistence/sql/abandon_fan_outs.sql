-- The parent stopped an invocation: every open fan-out of it is abandoned (no answer will
-- be decided). Returns the generations abandoned.
UPDATE {schema}.statifier_fan_outs
SET state = 'abandoned', settled_at = now()
WHERE parent_id = %(parent_id)s AND invoke_id = %(invoke_id)s AND state = 'open'
RETURNING generation
