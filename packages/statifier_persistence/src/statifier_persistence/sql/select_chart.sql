-- A registered chart; a source over the configured bound is not transferred.
SELECT name, version,
    octet_length(source) + octet_length(resolved_sources::text),
    CASE WHEN octet_length(source) + octet_length(resolved_sources::text) <= %(max_source)s
         THEN source END,
    CASE WHEN octet_length(source) + octet_length(resolved_sources::text) <= %(max_source)s
         THEN resolved_sources::text END
FROM {schema}.statifier_charts
WHERE identity = %(identity)s
