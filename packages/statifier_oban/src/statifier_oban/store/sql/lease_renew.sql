-- Extend a lease, only if it is still held at this epoch. No row back: it was taken over.
UPDATE {prefix}.statifier_session_leases
SET expires_at = now() + make_interval(secs => %(ttl_s)s)
WHERE scope = %(scope)s AND epoch = %(epoch)s
RETURNING expires_at
