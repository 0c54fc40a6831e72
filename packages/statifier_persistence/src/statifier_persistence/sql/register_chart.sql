-- Register a chart revision; an identity already registered is left as it is.
INSERT INTO {schema}.statifier_charts
    (identity, name, version, source, resolved_sources, source_identity)
VALUES
    (%(identity)s, %(name)s, %(version)s, %(source)s, %(resolved)s::jsonb, %(source_identity)s)
ON CONFLICT (identity) DO NOTHING
RETURNING identity
