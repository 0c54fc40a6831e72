-- Whether the mailbox of %(receiver)s holds the done of its child %(sender)s: the child
-- finished before its invocation was stopped, and its messages are still wanted.
SELECT EXISTS (
    SELECT 1 FROM {schema}.statifier_messages
    WHERE execution_id = %(receiver)s AND sender_id = %(sender)s AND kind = 'done'
)
