-- A waiter stops watching; watches that expired (their waiter died) go with it.
DELETE FROM {schema}.statifier_watches
WHERE (execution_id = %(id)s AND watcher = %(watcher)s) OR until < now()
