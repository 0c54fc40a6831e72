-- The row one step stores (store_executions.sql), from one value per parameter (the
-- names are the arrays' of stepped_rows.sql). PostgreSQL's generic plan of an unnest of
-- arrays expects ten rows, which costs it ten times the custom plan of an array of one:
-- it kept planning the statement again at nearly every step (about 0.3 ms each, as much
-- as running it). Of one row it expects one, so it keeps its generic plan, and psycopg
-- writes eleven values instead of eleven arrays (about 45 us less). A fragment.
SELECT %(ids)b::text AS id, %(positions)b::bytea AS position,
       %(macrosteps)b::bigint AS macrostep, %(rounds)b::bigint AS round,
       %(armed)b::text AS armed, %(statuses)b::text AS status,
       %(failures)b::text AS failure, %(outcomes)b::text AS outcome,
       %(keys)b::text AS key, %(kinds)b::text AS kind, %(entries)b::text AS entry
