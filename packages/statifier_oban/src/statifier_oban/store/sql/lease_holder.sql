-- Who holds the lease of a session id, until when, at which epoch.
SELECT owner, expires_at, epoch
FROM {prefix}.statifier_session_leases
WHERE scope = %(scope)s
