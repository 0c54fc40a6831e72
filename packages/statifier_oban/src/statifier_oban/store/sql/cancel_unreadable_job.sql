-- Cancel a job its producer fetched but cannot read (statifier_oban.store._fetch): one of
-- its json columns holds JSON Python's decoder refuses (nested deeper than the decoder
-- goes, an integer of more digits than int() reads). Every attempt would fail the same
-- way, so the job is cancelled, as a job whose args no worker can decode is, with the
-- reason appended to its errors for operators. Only the attempt this fetch started is
-- touched: the row still executing, attempted by this producer.
UPDATE {prefix}.oban_jobs
SET state = 'cancelled', cancelled_at = timezone('UTC', now()),
    errors = errors || jsonb_build_array(jsonb_build_object(
        'at', timezone('UTC', now()), 'attempt', attempt,
        'error', 'cancelled: ' || %(reason)s::text))
WHERE id = %(id)s AND state = 'executing' AND attempted_by = %(attempted_by)s::text[]
