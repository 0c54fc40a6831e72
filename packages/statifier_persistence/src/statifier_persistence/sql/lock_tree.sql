-- Serialize the children started in one tree (until this transaction ends), so that two
-- parents of the tree starting children at once count each other's. An advisory lock in
-- a key space of its own: row locks are never taken under it.
SELECT pg_advisory_xact_lock(%(space)s, hashtext(%(root)s))
