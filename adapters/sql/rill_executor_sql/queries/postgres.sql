-- PostgreSQL: every ledger operation is one autocommitted statement, decided on the server
-- and judged on the server's clock (a claim calls the function rill_claim). Each answers
-- (ok, now, job columns…): the job as the operation left it. The attempt history lives in
-- the job row (jsonb array, appended when an attempt ends), so a fresh call writes one row
-- twice: an insert, then an update.
-- A first claim with a watch inserts its job watched here too, and leasing a batch of notices
-- and settling one are one statement each; any other claim with a watch is a short
-- transaction decided in the client (see _flows.py); finish turns the watches into notices
-- here, in its one write.

-- name: claim_call
-- A claim: the function below, one statement.
SELECT * FROM rill_claim(CAST(%(job_id)s AS varchar), CAST(%(namespace)s AS varchar),
    CAST(%(job_key)s AS varchar), CAST(%(attempt_id)s AS varchar), CAST(%(lease_us)s AS bigint),
    CAST(%(fingerprint)s AS varchar), CAST(%(result_version)s AS varchar),
    CAST(%(origin)s AS text), CAST(%(trace)s AS varchar), CAST(%(watch)s AS jsonb))

-- name: claim_function
-- The claim (schema version 8; version 9: a takeover keeps a watched job's lapse due;
-- version 10: p_watch, a first claim's watch). A data-modifying statement pays for starting its INSERT even
-- when it inserts nothing, which was about half of a replay's server time; so the function
-- first reads the job and answers it untouched when no claim may take it (the rules of
-- `claim` below, negated: a replay, a live owner, a fingerprint mismatch). Otherwise a job
-- that is not there is inserted, ON CONFLICT DO NOTHING (its fence goes on from the row this
-- statement's snapshot still sees, or from a purged record's); anything else, or an insert
-- that met a concurrent one, runs `claim` itself, which decides on the row as it stands.
-- A claim with a watch (p_watch, {"id", "target"}) only inserts: its job watched by it, due
-- at its lease's end for a lapse notice (outbox_due); a job already there answers nothing,
-- and the caller decides in a short transaction (a replay's or a running job's watch).
-- Each statement in the function takes a new snapshot; the clock is the transaction's.
CREATE OR REPLACE FUNCTION rill_claim(
    p_job_id varchar, p_namespace varchar, p_job_key varchar, p_attempt_id varchar,
    p_lease_us bigint, p_fingerprint varchar, p_result_version varchar, p_origin text,
    p_trace varchar, p_watch jsonb DEFAULT NULL)
RETURNS TABLE ({answer}) LANGUAGE plpgsql VOLATILE AS $claim$
#variable_conflict use_column
DECLARE
    t bigint := (extract(epoch FROM now()) * 1000000)::bigint;
BEGIN
    IF p_watch IS NULL THEN
        RETURN QUERY SELECT false, t, {columns} FROM rill_jobs j WHERE j.job_id = p_job_id
            AND ((j.state <> 'processing' AND j.retain_until <= t)
              OR (j.fingerprint = p_fingerprint
                  AND j.result_version IS NOT DISTINCT FROM p_result_version
                  AND ((j.state = 'failed' AND j.retryable)
                       OR (j.state = 'processing' AND j.lease_until <= t)))) IS NOT TRUE;
        IF FOUND THEN
            RETURN;
        END IF;
    END IF;
    RETURN QUERY WITH ins AS (
        INSERT INTO rill_jobs AS j (
            job_id, namespace, job_key, state, fence, owner_attempt, claimed_at, lease_until,
            fingerprint, result_version, result, error, retryable, created_at, updated_at,
            finished_at, retain_until, attempts, outputs, origin, trace, watchers, notice_due)
        SELECT p_job_id, p_namespace, p_job_key, 'processing',
            coalesce((SELECT c.fence FROM rill_jobs c WHERE c.job_id = p_job_id),
                     (SELECT f.fence FROM rill_fences f WHERE f.job_id = p_job_id), 0) + 1,
            p_attempt_id, t, t + p_lease_us, p_fingerprint, p_result_version,
            NULL, NULL, NULL, t, t, NULL, NULL, '[]'::jsonb, '[]'::jsonb, p_origin, p_trace,
            CASE WHEN p_watch IS NULL THEN '{}'::jsonb
                ELSE jsonb_build_object(p_watch->>'id', p_watch->'target') END,
            CASE WHEN p_watch IS NULL THEN NULL ELSE t + p_lease_us END
        ON CONFLICT (job_id) DO NOTHING
        RETURNING {columns})
    SELECT true, t, ins.* FROM ins;
    IF FOUND OR p_watch IS NOT NULL THEN
        RETURN;
    END IF;
    RETURN QUERY {claim};
END
$claim$

-- name: claim
-- Inside rill_claim, its parameters %(x)s read as p_x.
-- Claims when there is no job, a retryable failure, an expired lease or a passed
-- retention (a new record's fence goes on from a purged one's, see purge); otherwise returns the job untouched, writing nothing (a replay is a pure read).
-- A takeover of a job still marked processing ends its owner's attempt as expired.
-- An empty answer means a concurrent claim won the insert race: the caller asks again.
WITH clock AS (
    SELECT (extract(epoch FROM now()) * 1000000)::bigint AS now_us
), cur AS (
    SELECT {columns} FROM rill_jobs j WHERE j.job_id = CAST(%(job_id)s AS varchar)
), ins AS (
    INSERT INTO rill_jobs AS j (
        job_id, namespace, job_key, state, fence, owner_attempt, claimed_at, lease_until,
        fingerprint, result_version, result, error, retryable, created_at, updated_at,
        finished_at, retain_until, attempts, outputs, origin, trace)
    SELECT CAST(%(job_id)s AS varchar), CAST(%(namespace)s AS varchar), CAST(%(job_key)s AS varchar), 'processing',
        -- a first claim continues from the fence a purged record left (rill_fences); cur's
        -- fence counts when a purge deleted the row after this statement's snapshot
        coalesce((SELECT cur.fence FROM cur),
                 (SELECT f.fence FROM rill_fences f WHERE f.job_id = CAST(%(job_id)s AS varchar)),
                 0) + 1,
        CAST(%(attempt_id)s AS varchar),
        clock.now_us, clock.now_us + CAST(%(lease_us)s AS bigint), CAST(%(fingerprint)s AS varchar), CAST(%(result_version)s AS varchar),
        NULL, NULL, NULL, clock.now_us, clock.now_us, NULL, NULL, '[]'::jsonb, '[]'::jsonb,
        CAST(%(origin)s AS text), CAST(%(trace)s AS varchar)
    FROM clock
    WHERE NOT EXISTS (SELECT 1 FROM cur)
       OR EXISTS (
            SELECT 1 FROM cur WHERE
               (cur.state <> 'processing' AND cur.retain_until <= clock.now_us)
            OR (cur.fingerprint = CAST(%(fingerprint)s AS varchar)
                AND cur.result_version IS NOT DISTINCT FROM CAST(%(result_version)s AS varchar)
                AND ((cur.state = 'failed' AND cur.retryable)
                     OR (cur.state = 'processing' AND cur.lease_until <= clock.now_us))))
    ON CONFLICT (job_id) DO UPDATE SET
        state = 'processing', fence = j.fence + 1, owner_attempt = EXCLUDED.owner_attempt,
        claimed_at = EXCLUDED.claimed_at, lease_until = EXCLUDED.lease_until,
        fingerprint = EXCLUDED.fingerprint, result_version = EXCLUDED.result_version,
        result = NULL, error = NULL, retryable = NULL, updated_at = EXCLUDED.updated_at,
        finished_at = NULL, retain_until = NULL, outputs = '[]'::jsonb,
        origin = EXCLUDED.origin, trace = EXCLUDED.trace,
        -- a watched job is looked at again when this lease ends, for its lapse (outbox_due)
        notice_due = CASE WHEN j.watchers = '{}'::jsonb THEN j.notice_due
            ELSE least(coalesce(j.notice_due, EXCLUDED.lease_until), EXCLUDED.lease_until) END,
        attempts = CASE WHEN j.state = 'processing' THEN j.attempts || jsonb_build_array(
            jsonb_build_object('fence', j.fence, 'attempt_id', j.owner_attempt,
                               'started_at', j.claimed_at, 'ended_at', EXCLUDED.claimed_at,
                               'outcome', 'expired', 'error', NULL,
                               'origin', CAST(j.origin AS jsonb), 'trace', j.trace,
                               'outputs', (SELECT coalesce(jsonb_agg(
                                   o || '{"committed": false}'::jsonb), '[]'::jsonb)
                                   FROM jsonb_array_elements(j.outputs) o)))
            ELSE j.attempts END
    WHERE (j.state <> 'processing' AND j.retain_until <= EXCLUDED.claimed_at)
       OR (j.fingerprint = EXCLUDED.fingerprint
           AND j.result_version IS NOT DISTINCT FROM EXCLUDED.result_version
           AND ((j.state = 'failed' AND j.retryable)
                OR (j.state = 'processing' AND j.lease_until <= EXCLUDED.claimed_at)))
    RETURNING {columns}
)
SELECT true AS ok, clock.now_us AS now, ins.* FROM ins, clock
UNION ALL
SELECT false, clock.now_us, cur.* FROM cur, clock WHERE NOT EXISTS (SELECT 1 FROM ins)

-- name: heartbeat
WITH clock AS (
    SELECT (extract(epoch FROM now()) * 1000000)::bigint AS now_us
), upd AS (
    UPDATE rill_jobs j
    SET lease_until = clock.now_us + CAST(%(lease_us)s AS bigint), updated_at = clock.now_us
    FROM clock
    WHERE j.job_id = CAST(%(job_id)s AS varchar) AND j.fence = CAST(%(fence)s AS bigint) AND j.owner_attempt = CAST(%(attempt_id)s AS varchar)
      AND j.state = 'processing' AND j.lease_until > clock.now_us
    RETURNING {columns}
)
SELECT true AS ok, clock.now_us AS now, upd.* FROM upd, clock
UNION ALL
SELECT false, clock.now_us, {columns} FROM rill_jobs j, clock
WHERE j.job_id = CAST(%(job_id)s AS varchar) AND NOT EXISTS (SELECT 1 FROM upd)

-- name: register_output
-- An output the owner is about to write, recorded before it exists (fenced like a heartbeat).
WITH clock AS (
    SELECT (extract(epoch FROM now()) * 1000000)::bigint AS now_us
), upd AS (
    UPDATE rill_jobs j
    SET outputs = j.outputs || jsonb_build_array(CAST(%(output)s AS jsonb)),
        updated_at = clock.now_us
    FROM clock
    WHERE j.job_id = CAST(%(job_id)s AS varchar) AND j.fence = CAST(%(fence)s AS bigint)
      AND j.owner_attempt = CAST(%(attempt_id)s AS varchar)
      AND j.state = 'processing' AND j.lease_until > clock.now_us
    RETURNING {columns}
)
SELECT true AS ok, clock.now_us AS now, upd.* FROM upd, clock
UNION ALL
SELECT false, clock.now_us, {columns} FROM rill_jobs j, clock
WHERE j.job_id = CAST(%(job_id)s AS varchar) AND NOT EXISTS (SELECT 1 FROM upd)

-- name: finish
-- Commit or fail: the result, the attempt's entry in the history and a notice per watch
-- (finish_notices: id "{fence}.{n}", n its 1-based place in the array), in one fenced write.
WITH clock AS (
    SELECT (extract(epoch FROM now()) * 1000000)::bigint AS now_us
), upd AS (
    UPDATE rill_jobs j
    SET state = CAST(%(state)s AS varchar), lease_until = NULL, result = CAST(%(result)s AS text), error = CAST(%(error)s AS text),
        retryable = CAST(%(retryable)s AS boolean), updated_at = clock.now_us, finished_at = clock.now_us,
        retain_until = clock.now_us + CAST(%(retention_us)s AS bigint),
        attempts = j.attempts || jsonb_build_array(jsonb_build_object(
            'fence', j.fence, 'attempt_id', j.owner_attempt, 'started_at', j.claimed_at,
            'ended_at', clock.now_us, 'outcome', CAST(%(outcome)s AS text),
            'error', CAST(%(error)s AS jsonb), 'origin', CAST(j.origin AS jsonb),
            'trace', j.trace,
            'outputs', (SELECT coalesce(jsonb_agg(o), '[]'::jsonb) FROM (
                SELECT c || '{"committed": true}'::jsonb AS o
                FROM jsonb_array_elements(CAST(%(outputs)s AS jsonb)) c
                UNION ALL
                SELECT r || '{"committed": false}'::jsonb
                FROM jsonb_array_elements(j.outputs) r
                WHERE NOT EXISTS (
                    SELECT 1 FROM jsonb_array_elements(CAST(%(outputs)s AS jsonb)) c
                    WHERE c ->> 'key' = r ->> 'key')) ended))),
        outputs = '[]'::jsonb,
        notices = CASE WHEN j.watchers = '{}'::jsonb THEN j.notices
            ELSE j.notices || (SELECT jsonb_agg({new_notice} ORDER BY n.seq)
                FROM (SELECT w.n AS seq, w.id AS watch, w.target, CAST(%(state)s AS text)
                        AS state, CAST(%(error)s AS jsonb) AS error
                    FROM jsonb_each(j.watchers) WITH ORDINALITY AS w(id, target, n)) n) END,
        notice_due = CASE WHEN j.watchers = '{}'::jsonb THEN j.notice_due
            ELSE least(j.notice_due, clock.now_us) END,
        watchers = '{}'::jsonb
    FROM clock
    WHERE j.job_id = CAST(%(job_id)s AS varchar) AND j.fence = CAST(%(fence)s AS bigint) AND j.owner_attempt = CAST(%(attempt_id)s AS varchar)
      AND j.state = 'processing' AND j.lease_until > clock.now_us
    RETURNING {columns}
)
SELECT true AS ok, clock.now_us AS now, upd.* FROM upd, clock
UNION ALL
SELECT false, clock.now_us, {columns} FROM rill_jobs j, clock
WHERE j.job_id = CAST(%(job_id)s AS varchar) AND NOT EXISTS (SELECT 1 FROM upd)

-- name: settle
-- A delivery's end recorded on its notice (settle_notice), in one statement: only while the
-- settling deliverer holds the notice's lease (the notice pending, its lease owner, the
-- lease not run out), else nothing is written. A notice given back unsent (tried false)
-- has its lease's try taken off again. notice_due follows (outbox_due): the earliest
-- of the other pending notices' due or lease end, this one's retry when it is pending
-- again, and a watched running job's lease end while no lapse notice of its fence is there.
WITH clock AS (
    SELECT (extract(epoch FROM now()) * 1000000)::bigint AS now_us
), upd AS (
    UPDATE rill_jobs j
    SET notices = (SELECT jsonb_agg(CASE WHEN e.n ->> 'id' = CAST(%(notice_id)s AS text)
            THEN e.n || jsonb_build_object(
                'status', CAST(%(status)s AS text), 'lease_owner', NULL, 'lease_until', NULL,
                'outcome', CAST(%(outcome)s AS text), 'detail', CAST(%(detail)s AS text),
                'attempts', CASE WHEN CAST(%(tried)s AS boolean) THEN e.n -> 'attempts'
                    ELSE to_jsonb((e.n ->> 'attempts')::bigint - 1) END,
                'settled_at', CASE WHEN CAST(%(status)s AS text) = 'pending' THEN NULL
                    ELSE clock.now_us END,
                'due', CASE WHEN CAST(%(status)s AS text) = 'pending'
                    THEN to_jsonb(clock.now_us + CAST(%(retry_in_us)s AS bigint))
                    ELSE e.n -> 'due' END)
            ELSE e.n END ORDER BY e.i)
            FROM jsonb_array_elements(j.notices) WITH ORDINALITY AS e(n, i)),
        notice_due = (SELECT min(d.due) FROM (
            SELECT greatest((o ->> 'due')::bigint, coalesce((o ->> 'lease_until')::bigint, 0))
            FROM jsonb_array_elements(j.notices) o
            WHERE o ->> 'status' = 'pending' AND o ->> 'id' <> CAST(%(notice_id)s AS text)
            UNION ALL
            SELECT clock.now_us + CAST(%(retry_in_us)s AS bigint)
            WHERE CAST(%(status)s AS text) = 'pending'
            UNION ALL
            SELECT j.lease_until WHERE {awaits_lapse}
            ) AS d(due))
    FROM clock
    WHERE j.job_id = CAST(%(job_id)s AS varchar)
      AND EXISTS (SELECT 1 FROM jsonb_array_elements(j.notices) h
          WHERE h ->> 'id' = CAST(%(notice_id)s AS text) AND h ->> 'status' = 'pending'
            AND h ->> 'lease_owner' = CAST(%(owner)s AS text)
            AND (h ->> 'lease_until')::bigint > clock.now_us)
    RETURNING j.job_id
)
SELECT count(*) AS settled FROM upd

-- name: awaits_lapse
-- Not a statement: the condition, written {awaits_lapse} in the statements, that the job row
-- j (its notices in j.notices) waits for a lapse notice: processing, watched, and none yet
-- for its owner's fence (_lapse_due in rill_executor/_rules/notices.py).
(j.state = 'processing' AND j.lease_until IS NOT NULL AND j.watchers <> '{}'::jsonb
    AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(j.notices) l
        WHERE l ->> 'state' = 'processing' AND (l ->> 'fence')::bigint = j.fence))

-- name: new_notice
-- Not a statement: a pending notice of the job row j (as _rules/notices.py makes one), written
-- {new_notice}, from the row n: seq (its place among the notices added at once), watch,
-- target, state and error.
jsonb_build_object('id', concat(j.fence, '.', jsonb_array_length(j.notices) + n.seq),
    'watch', n.watch, 'target', n.target, 'fence', j.fence, 'state', n.state,
    'error', n.error, 'status', 'pending', 'attempts', 0, 'due', clock.now_us,
    'lease_owner', NULL, 'lease_until', NULL, 'outcome', NULL, 'detail', NULL,
    'created_at', clock.now_us, 'settled_at', NULL)

-- name: lease_notices
-- Leasing notices (lease_notices in _flows.py, one statement here): up to %(limit)s jobs of a
-- namespace with notice_due passed, earliest first, locked (rows another deliverer or a
-- write holds are skipped). A watched job whose owner's lease ran out and that has no lapse
-- notice of its fence gets one (lapse_notices). Of their leasable notices (pending, due, no
-- live lease) the %(limit)s earliest are leased to %(owner)s (lease_notice), and each job's
-- notice_due follows (outbox_due); a job nothing changed is not written. Answers one row
-- per leased notice, earliest first, or one row of NULLs: now is always there.
WITH clock AS (
    SELECT (extract(epoch FROM now()) * 1000000)::bigint AS now_us
), picked AS (
    SELECT j.job_id, j.namespace, j.job_key, j.result, j.state, j.fence, j.lease_until,
        j.watchers, j.notices, j.notice_due
    FROM rill_jobs j, clock
    WHERE j.namespace = CAST(%(namespace)s AS varchar) AND j.notice_due <= clock.now_us
    ORDER BY j.notice_due
    LIMIT CAST(%(limit)s AS bigint)
    FOR UPDATE OF j SKIP LOCKED
), found AS (
    SELECT j.*, CASE WHEN {awaits_lapse} AND j.lease_until <= clock.now_us
        THEN j.notices || (SELECT jsonb_build_array({new_notice}) FROM (SELECT 1 AS seq,
            '' AS watch, NULL::jsonb AS target, 'processing' AS state, NULL::jsonb AS error) n)
        ELSE j.notices END AS seen
    FROM picked j, clock
), chosen AS (
    SELECT c.job_id, c.i, c.r FROM (
        SELECT f.job_id, e.i, row_number() OVER (
            ORDER BY (e.n ->> 'due')::bigint, f.notice_due, f.job_id, e.i) AS r
        FROM found f, clock, jsonb_array_elements(f.seen) WITH ORDINALITY AS e(n, i)
        WHERE e.n ->> 'status' = 'pending' AND (e.n ->> 'due')::bigint <= clock.now_us
          AND coalesce((e.n ->> 'lease_until')::bigint, 0) <= clock.now_us) c
    WHERE c.r <= CAST(%(limit)s AS bigint)
), leased AS (
    SELECT f.job_id, f.namespace, f.job_key, f.result, f.state, f.fence, f.lease_until,
        f.watchers, f.notice_due, f.notices AS stored, (SELECT coalesce(jsonb_agg(CASE WHEN EXISTS (
                SELECT 1 FROM chosen c WHERE c.job_id = f.job_id AND c.i = e.i)
            THEN e.n || jsonb_build_object('lease_owner', CAST(%(owner)s AS text),
                'lease_until', clock.now_us + CAST(%(lease_us)s AS bigint),
                'attempts', (e.n ->> 'attempts')::bigint + 1)
            ELSE e.n END ORDER BY e.i), '[]'::jsonb)
            FROM jsonb_array_elements(f.seen) WITH ORDINALITY AS e(n, i)) AS notices
    FROM found f, clock
), due AS (
    SELECT j.*, (SELECT min(d.due) FROM (
            SELECT greatest((o ->> 'due')::bigint, coalesce((o ->> 'lease_until')::bigint, 0))
            FROM jsonb_array_elements(j.notices) o
            WHERE o ->> 'status' = 'pending'
            UNION ALL
            SELECT j.lease_until WHERE {awaits_lapse}
            ) AS d(due)) AS next_due
    FROM leased j
), upd AS (
    UPDATE rill_jobs j SET notices = d.notices, notice_due = d.next_due
    FROM due d
    WHERE j.job_id = d.job_id
      AND (d.notices <> d.stored OR d.next_due IS DISTINCT FROM d.notice_due)
)
SELECT clock.now_us AS now, d.job_id, d.namespace, d.job_key,
    (d.notices -> (c.i::int - 1))::text AS notice, d.result
FROM clock LEFT JOIN (chosen c JOIN due d ON d.job_id = c.job_id) ON true
ORDER BY c.r

-- name: status
SELECT (extract(epoch FROM now()) * 1000000)::bigint AS now, {columns},
    j.attempts::text AS attempts, j.events::text AS events
FROM rill_jobs j WHERE j.job_id = CAST(%(job_id)s AS varchar)

-- name: purge
-- Deletes up to %(limit)s of a namespace's records past retention after the cursor, in job
-- id order, skipping rows a claim holds locked: ended with retain_until passed, or
-- processing with the lease run out %(dangling_us)s ago (or released by a redo as long ago). A record with a pending notice
-- (notice_due set) is kept and counted. Each deleted job's last fence stays in rill_fences
-- for one retention (its own, at least %(dangling_us)s), and as many of the namespace's
-- fences kept that long go. The cursor is the last job id picked when the batch was full.
WITH clock AS (
    SELECT (extract(epoch FROM now()) * 1000000)::bigint AS now_us
), picked AS (
    SELECT j.job_id, j.notice_due
    FROM rill_jobs j, clock
    WHERE j.namespace = CAST(%(namespace)s AS varchar)
      AND j.job_id > CAST(%(after)s AS varchar)
      AND ((j.state <> 'processing' AND coalesce(j.retain_until, 0) <= clock.now_us
            -- a record a redo released (retain_until = finished_at) is kept as a dangling one
            AND (coalesce(j.retain_until, 0) <> coalesce(j.finished_at, 0)
              OR coalesce(j.finished_at, 0) + CAST(%(dangling_us)s AS bigint) <= clock.now_us))
        OR (j.state = 'processing'
            AND coalesce(j.lease_until, 0) + CAST(%(dangling_us)s AS bigint) <= clock.now_us))
    ORDER BY j.job_id
    LIMIT CAST(%(limit)s AS bigint)
    FOR UPDATE OF j SKIP LOCKED
), gone AS (
    DELETE FROM rill_jobs j USING picked
    WHERE j.job_id = picked.job_id AND picked.notice_due IS NULL
    RETURNING j.job_id, j.namespace, j.fence, j.state, j.finished_at, j.retain_until
), kept AS (
    INSERT INTO rill_fences AS f (job_id, namespace, fence, keep_until)
    SELECT gone.job_id, gone.namespace, gone.fence,
        clock.now_us + greatest(CAST(%(dangling_us)s AS bigint), CASE
            WHEN gone.state <> 'processing' THEN coalesce(gone.retain_until - gone.finished_at, 0)
            ELSE 0 END)
    FROM gone, clock
    ON CONFLICT (job_id) DO UPDATE SET fence = EXCLUDED.fence, keep_until = EXCLUDED.keep_until
), swept AS (
    DELETE FROM rill_fences f
    WHERE f.job_id IN (
        SELECT e.job_id FROM rill_fences e, clock
        WHERE e.namespace = CAST(%(namespace)s AS varchar) AND e.keep_until <= clock.now_us
          AND e.job_id NOT IN (SELECT picked.job_id FROM picked)
        ORDER BY e.keep_until
        LIMIT CAST(%(limit)s AS bigint)
        FOR UPDATE OF e SKIP LOCKED)
)
SELECT clock.now_us AS now,
    (SELECT count(*) FROM gone) AS purged,
    (SELECT count(*) FROM picked WHERE picked.notice_due IS NOT NULL) AS kept,
    CASE WHEN (SELECT count(*) FROM picked) = CAST(%(limit)s AS bigint)
         THEN (SELECT max(picked.job_id) FROM picked) END AS cursor
FROM clock
