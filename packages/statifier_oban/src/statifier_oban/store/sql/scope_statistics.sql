-- statifier_oban planner statistics (ADR 32)

-- What the planner knows of a job's scope. Every statement on timer, invocation and child
-- start jobs filters on args->>'scope'; without statistics of that expression the
-- planner guesses that 0.5% of the table shares one scope (5,000 rows of a million), so
-- the generic plan of a prepared statement looks far costlier than a plan for the value
-- at hand, and the statement is planned again at every execution: with a million pending
-- timers, an operator's `executions show` read their jobs three times slower than with a
-- thousand. With them, a scope is known to hold a few rows. Expression statistics need
-- PostgreSQL 14 (on an older server this does nothing); a new statistics object is
-- filled at once (ANALYZE samples a bounded number of rows), and by autovacuum after.
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 140000 AND NOT EXISTS (
        SELECT 1
        FROM pg_catalog.pg_statistic_ext AS s
        JOIN pg_catalog.pg_namespace AS n ON n.oid = s.stxnamespace
        WHERE n.nspname = '{prefix}' AND s.stxname = '{scope_statistics}'
    ) THEN
        EXECUTE 'CREATE STATISTICS {prefix}.{scope_statistics} ON ((args->>''scope''))'
                ' FROM {prefix}.oban_jobs';
        EXECUTE 'ANALYZE {prefix}.oban_jobs';
    END IF;
END
$$;
