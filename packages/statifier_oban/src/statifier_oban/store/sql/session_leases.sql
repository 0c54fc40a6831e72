-- statifier_oban: who owns each live session id (one writer per session, ADR 14).
--
-- A row per session id that ever had an owner. epoch only grows (a row is never deleted,
-- so an old owner's epoch can never come back): every write an owner makes under its
-- lease (timer jobs, the host's own position saves) first checks, in its transaction,
-- that the epoch is still its own.
CREATE TABLE IF NOT EXISTS {prefix}.statifier_session_leases (
    scope text PRIMARY KEY,
    epoch bigint NOT NULL,
    owner text NOT NULL,
    acquired_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
