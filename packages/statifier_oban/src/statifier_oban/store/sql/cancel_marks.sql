-- The cancel marks of a live session's timer jobs that may still run
-- (mark_cancelled_timers.sql), read once when the session is resumed. At most %(limit)s
-- rows. A row's fields are as anyone wrote them: the send id comes back only within
-- %(max_string)s characters, the mark only as a JSON number of at most %(max_digits)s
-- characters (else null, and the reader skips the row).
SELECT id,
       CASE WHEN char_length(args->>'send_id') <= %(max_string)s THEN args->>'send_id' END,
       CASE WHEN jsonb_typeof(meta->'cancel_ordinal') = 'number'
             AND char_length(meta->>'cancel_ordinal') <= %(max_digits)s
            THEN meta->'cancel_ordinal' END
FROM {prefix}.oban_jobs
WHERE worker = {timer_worker} AND args->>'scope' = %(scope)s
  AND state IN ({pending_states}, 'executing') AND meta ? 'cancel_ordinal'
LIMIT %(limit)s
