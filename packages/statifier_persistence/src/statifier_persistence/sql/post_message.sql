-- A message into the mailbox of %(receiver)s, unless it already holds %(max_pending)s
-- (then nothing is written and no row returns: the sender hears error.communication).
INSERT INTO {schema}.statifier_messages (execution_id, sender_id, invoke_id, kind, body)
SELECT %(receiver)s, %(sender)s, %(invoke_id)s, %(kind)s, %(body)s::jsonb
WHERE (
    SELECT count(*) FROM (
        SELECT 1 FROM {schema}.statifier_messages
        WHERE execution_id = %(receiver)s
        LIMIT %(max_pending)s
    ) AS pending
) < %(max_pending)s
RETURNING id
