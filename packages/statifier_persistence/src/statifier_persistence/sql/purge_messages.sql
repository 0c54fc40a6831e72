-- Every message waiting for %(receiver)s, dropped: it finished (or is gone), and nothing
-- is delivered into a finished execution.
DELETE FROM {schema}.statifier_messages
WHERE execution_id = %(receiver)s
