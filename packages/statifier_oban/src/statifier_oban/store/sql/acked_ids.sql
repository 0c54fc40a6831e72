-- The rows a batch of acks changes, by primary key (ack_jobs.sql). A fragment.
jobs.id = ANY(%(ids)s::bigint[])
