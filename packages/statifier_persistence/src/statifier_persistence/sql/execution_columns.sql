id, chart_identity, chart_name, chart_version, status,
CASE WHEN octet_length(metadata::text) <= %(max_metadata)s THEN metadata::text END,
octet_length(metadata::text),
parent_id, parent_invoke_id, child_index,
CASE WHEN octet_length(failure::text) <= %(max_metadata)s THEN failure::text END,
octet_length(failure::text),
CASE WHEN octet_length(outcome::text) <= %(max_outcome)s THEN outcome::text END,
octet_length(outcome::text),
step_count, created_at, updated_at, history_seq
