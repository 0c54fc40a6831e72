-- The oldest message in the mailbox of %(receiver)s, deleted by the step that applies it
-- (the receiver's row is locked by that step: no other step takes it meanwhile), with the
-- caller context of the sender's <invoke> when the sender is a child (its done.invoke
-- carries it). A body or context over the bound is not transferred, only its size.
DELETE FROM {schema}.statifier_messages AS m
WHERE m.id = (
    SELECT id FROM {schema}.statifier_messages
    WHERE execution_id = %(receiver)s
    ORDER BY id
    LIMIT 1
)
RETURNING m.id, m.sender_id, m.invoke_id, m.kind,
    octet_length(m.body::text),
    CASE WHEN octet_length(m.body::text) <= %(max_body)s THEN m.body::text END,
    (SELECT CASE WHEN octet_length(e.invoke_context::text) <= %(max_context)s
                 THEN e.invoke_context::text END
     FROM {schema}.statifier_executions AS e WHERE e.id = m.sender_id)
