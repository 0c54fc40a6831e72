octet_length(position),
CASE WHEN octet_length(position) <= %(max_position)s THEN position END,
position_macrostep,
position_round,
octet_length(armed::text),
CASE WHEN octet_length(armed::text) <= %(max_position)s THEN armed::text END
