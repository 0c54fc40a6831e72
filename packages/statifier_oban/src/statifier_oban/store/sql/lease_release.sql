-- Give a lease up (it expires now), only if still held at this epoch; the epoch stays.
UPDATE {prefix}.statifier_session_leases
SET expires_at = now()
WHERE scope = %(scope)s AND epoch = %(epoch)s
RETURNING epoch
