-- Whether a step with this key was applied to the execution.
SELECT step_count FROM {schema}.statifier_step_keys
WHERE execution_id = %(id)s AND key = %(key)s
