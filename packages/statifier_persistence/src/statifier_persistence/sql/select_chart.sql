-- A registered chart, by its identity or else by the identity of its source bytes (which
-- charts had before canonical identities); a source over the configured bound is not
-- transferred.
SELECT name, version,
    octet_length(source) + octet_length(resolved_sources::text),
    CASE WHEN octet_length(source) + octet_length(resolved_sources::text) <= %(max_source)s
         THEN source END,
    CASE WHEN octet_length(source) + octet_length(resolved_sources::text) <= %(max_source)s
         THEN resolved_sources::text END,
    identity
FROM {schema}.statifier_charts
WHERE identity = %(identity)s OR source_identity = %(identity)s
ORDER BY identity = %(identity)s DESC
LIMIT 1
