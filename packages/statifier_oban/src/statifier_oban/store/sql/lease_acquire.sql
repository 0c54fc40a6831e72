-- Take the lease of a session id: a new row at epoch 1, or the next epoch when the lease
-- has expired or the caller takes over (%(takeover)s). No row back: someone holds it.
INSERT INTO {prefix}.statifier_session_leases AS l (scope, epoch, owner, acquired_at, expires_at)
VALUES (%(scope)s, 1, %(owner)s, now(), now() + make_interval(secs => %(ttl_s)s))
ON CONFLICT (scope) DO UPDATE
SET epoch = l.epoch + 1, owner = excluded.owner, acquired_at = excluded.acquired_at,
    expires_at = excluded.expires_at
WHERE l.expires_at <= now() OR %(takeover)s
RETURNING epoch, expires_at
