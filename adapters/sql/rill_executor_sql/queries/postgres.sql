-- PostgreSQL: every ledger operation is one statement, decided on the server, judged on
-- the server's clock. Each answers (ok, now, job columns…): the job as the operation left it.

-- name: claim
-- Claims when there is no job, a retryable failure, an expired lease or a passed
-- retention; otherwise returns the job untouched, writing nothing (a replay is a pure read).
-- An empty answer means a concurrent claim won the insert race: the caller asks again.
WITH clock AS (
    SELECT (extract(epoch FROM now()) * 1000000)::bigint AS now_us
), cur AS (
    SELECT j.* FROM rill_jobs j WHERE j.job_id = CAST(:job_id AS varchar)
), ins AS (
    INSERT INTO rill_jobs AS j (
        job_id, namespace, job_key, state, fence, owner_attempt, claimed_at, lease_until,
        fingerprint, result_version, result, error, retryable, created_at, updated_at,
        finished_at, retain_until)
    SELECT CAST(:job_id AS varchar), CAST(:namespace AS varchar), CAST(:job_key AS varchar), 'processing', 1, CAST(:attempt_id AS varchar), clock.now_us,
        clock.now_us + CAST(:lease_us AS bigint), CAST(:fingerprint AS varchar),
        CAST(:result_version AS varchar), NULL, NULL, NULL, clock.now_us, clock.now_us,
        NULL, NULL
    FROM clock
    WHERE NOT EXISTS (SELECT 1 FROM cur)
       OR EXISTS (
            SELECT 1 FROM cur WHERE
               (cur.state <> 'processing' AND cur.retain_until <= clock.now_us)
            OR (cur.fingerprint = CAST(:fingerprint AS varchar)
                AND cur.result_version IS NOT DISTINCT FROM CAST(:result_version AS varchar)
                AND ((cur.state = 'failed' AND cur.retryable)
                     OR (cur.state = 'processing' AND cur.lease_until <= clock.now_us))))
    ON CONFLICT (job_id) DO UPDATE SET
        state = 'processing', fence = j.fence + 1, owner_attempt = EXCLUDED.owner_attempt,
        claimed_at = EXCLUDED.claimed_at, lease_until = EXCLUDED.lease_until,
        fingerprint = EXCLUDED.fingerprint, result_version = EXCLUDED.result_version,
        result = NULL, error = NULL, retryable = NULL, updated_at = EXCLUDED.updated_at,
        finished_at = NULL, retain_until = NULL
    WHERE (j.state <> 'processing' AND j.retain_until <= EXCLUDED.claimed_at)
       OR (j.fingerprint = EXCLUDED.fingerprint
           AND j.result_version IS NOT DISTINCT FROM EXCLUDED.result_version
           AND ((j.state = 'failed' AND j.retryable)
                OR (j.state = 'processing' AND j.lease_until <= EXCLUDED.claimed_at)))
    RETURNING j.*
), expired AS (
    UPDATE rill_attempts a SET outcome = 'expired', ended_at = ins.claimed_at
    FROM ins
    WHERE a.job_id = ins.job_id AND a.fence = ins.fence - 1 AND a.outcome = 'running'
), attempt AS (
    INSERT INTO rill_attempts (job_id, fence, attempt_id, started_at, ended_at, outcome, error)
    SELECT job_id, fence, owner_attempt, claimed_at, NULL, 'running', NULL FROM ins
)
SELECT true AS ok, clock.now_us AS now, ins.* FROM ins, clock
UNION ALL
SELECT false, clock.now_us, cur.* FROM cur, clock WHERE NOT EXISTS (SELECT 1 FROM ins)

-- name: heartbeat
WITH clock AS (
    SELECT (extract(epoch FROM now()) * 1000000)::bigint AS now_us
), upd AS (
    UPDATE rill_jobs j
    SET lease_until = clock.now_us + CAST(:lease_us AS bigint), updated_at = clock.now_us
    FROM clock
    WHERE j.job_id = CAST(:job_id AS varchar) AND j.fence = CAST(:fence AS bigint) AND j.owner_attempt = CAST(:attempt_id AS varchar)
      AND j.state = 'processing' AND j.lease_until > clock.now_us
    RETURNING j.*
)
SELECT true AS ok, clock.now_us AS now, upd.* FROM upd, clock
UNION ALL
SELECT false, clock.now_us, j.* FROM rill_jobs j, clock
WHERE j.job_id = CAST(:job_id AS varchar) AND NOT EXISTS (SELECT 1 FROM upd)

-- name: finish
WITH clock AS (
    SELECT (extract(epoch FROM now()) * 1000000)::bigint AS now_us
), upd AS (
    UPDATE rill_jobs j
    SET state = CAST(:state AS varchar), lease_until = NULL, result = CAST(:result AS text),
        error = CAST(:error AS text), retryable = CAST(:retryable AS boolean),
        updated_at = clock.now_us, finished_at = clock.now_us,
        retain_until = clock.now_us + CAST(:retention_us AS bigint)
    FROM clock
    WHERE j.job_id = CAST(:job_id AS varchar) AND j.fence = CAST(:fence AS bigint) AND j.owner_attempt = CAST(:attempt_id AS varchar)
      AND j.state = 'processing' AND j.lease_until > clock.now_us
    RETURNING j.*
), attempt AS (
    UPDATE rill_attempts a
    SET outcome = CAST(:outcome AS varchar), ended_at = upd.finished_at, error = CAST(:error AS text)
    FROM upd
    WHERE a.job_id = upd.job_id AND a.fence = upd.fence
)
SELECT true AS ok, clock.now_us AS now, upd.* FROM upd, clock
UNION ALL
SELECT false, clock.now_us, j.* FROM rill_jobs j, clock
WHERE j.job_id = CAST(:job_id AS varchar) AND NOT EXISTS (SELECT 1 FROM upd)
