-- Put back the jobs a stopping worker cut short (statifier-oban worker, after its grace
-- period). oban leaves them executing until a rescue; they go back to available at once,
-- without spending the attempt the stop interrupted (meta.returned + 1 records it).
-- Only rows still executing under this node are touched.
UPDATE {prefix}.oban_jobs
SET state = 'available',
    attempt = GREATEST(attempt - 1, 0),
    scheduled_at = timezone('UTC', now()),
    meta = meta || jsonb_build_object('returned', coalesce((meta->>'returned')::int, 0) + 1)
WHERE id = ANY(%(ids)s) AND state = 'executing' AND attempted_by[1] = %(node)s
RETURNING id
