-- Record a step's key in the step's own transaction (the primary key makes it unique).
INSERT INTO {schema}.statifier_step_keys (execution_id, key, step_count)
VALUES (%(id)s, %(key)s, %(step_count)s)
