-- The rows a group of steps stores (store_executions.sql): each parameter an array with
-- one element per execution, in the same order, sent in binary (a "b" placeholder):
-- psycopg writes a text array element by element in Python (about 20 ms for the
-- positions and entries of 50 steps), a binary one in C (about 0.1 ms). A fragment.
SELECT *
FROM unnest(
    %(ids)b::text[], %(positions)b::bytea[], %(macrosteps)b::bigint[],
    %(rounds)b::bigint[], %(armed)b::text[], %(statuses)b::text[],
    %(failures)b::text[], %(outcomes)b::text[], %(keys)b::text[], %(kinds)b::text[],
    %(entries)b::text[]
) AS s (id, position, macrostep, round, armed, status, failure, outcome, key, kind,
        entry)
