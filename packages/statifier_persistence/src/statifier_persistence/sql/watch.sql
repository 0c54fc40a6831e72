-- A waiter watches an execution until %(ttl_s)s seconds from now (again: renews it).
-- Steps of a watched execution notify on commit (journal.sql).
INSERT INTO {schema}.statifier_watches (execution_id, watcher, until)
VALUES (%(id)s, %(watcher)s, now() + %(ttl_s)s * interval '1 second')
ON CONFLICT ON CONSTRAINT statifier_watches_key DO UPDATE SET until = excluded.until
