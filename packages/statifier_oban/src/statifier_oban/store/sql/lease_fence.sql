-- The fencing check of a write made under a lease, run first in the write's transaction.
-- FOR SHARE keeps a takeover (an UPDATE of the row) from committing until that write
-- commits or rolls back: a write that saw its own epoch here is never overtaken.
SELECT epoch, owner
FROM {prefix}.statifier_session_leases
WHERE scope = %(scope)s
FOR SHARE
