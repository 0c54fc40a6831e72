-- The row a batch of one ack changes, by primary key (ack_jobs.sql). A generic plan of
-- "= ANY" of an array it cannot see expects several rows and costs three times the custom
-- plan of an array of one, so PostgreSQL planned that ack again every time (0.13 ms of
-- planning for 0.03 ms of running); of one id it expects one row and keeps its generic
-- plan. A fragment.
jobs.id = %(id)s::bigint
