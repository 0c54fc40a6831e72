-- One execution with its position ({lock}: FOR UPDATE when stepping). A position or
-- metadata over the configured bounds is not transferred, only its size.
SELECT {columns},
    octet_length(position),
    CASE WHEN octet_length(position) <= %(max_position)s THEN position END
FROM {schema}.statifier_executions
WHERE id = %(id)s
{lock}
