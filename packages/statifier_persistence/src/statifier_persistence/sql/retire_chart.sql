-- Retire a revision locked by this transaction: it takes no new execution or migration.
UPDATE {schema}.statifier_charts
SET retired_at = now()
WHERE identity = %(identity)s AND retired_at IS NULL
