-- One batch of retention by age: delete up to %(batch)s entries written before %(cutoff)s
-- (found through the BRIN index on `at`; in no particular order, so that a batch never
-- sorts every old entry). The caller repeats it, one transaction per batch, until a batch
-- deletes fewer than %(batch)s.
WITH doomed AS (
    SELECT execution_id, seq
    FROM {schema}.statifier_history
    WHERE at < %(cutoff)s
    LIMIT %(batch)s
)
DELETE FROM {schema}.statifier_history AS h
USING doomed
WHERE h.execution_id = doomed.execution_id AND h.seq = doomed.seq
RETURNING h.execution_id
