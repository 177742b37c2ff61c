"""Each store operation as a sans-IO generator: it yields statements and receives their rows.

``SqlStore`` and ``AsyncSqlStore`` drive the same generators; only their I/O differs.
PostgreSQL runs one server-decided statement per operation (``queries/postgres.sql``);
SQLite and MariaDB run one short transaction that locks the job row and applies the
lifecycle rules of ``rill_executor.store`` in Python, on the database's clock.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import asdict
from functools import cache
from typing import Any, TypeAlias

from sqlalchemy import Executable, and_, bindparam, select, update

from rill_executor.store import (
    AttemptOutcome,
    AttemptRef,
    AttemptRow,
    ClaimAction,
    ClaimRequest,
    Completion,
    JobRow,
    JobState,
    StoreAnswer,
    StoreStatus,
    StoreUnavailable,
    check_write,
    claimed_row,
    decide_claim,
    finished_row,
    heartbeat_row,
)

from ._dialect import SqlDialect
from ._queries import named
from ._schema import attempts, jobs

__all__ = ["Flow", "Step", "claim", "finish", "heartbeat", "status"]

Rows: TypeAlias = Sequence[Mapping[Any, Any]]
Step: TypeAlias = tuple[Executable, dict[str, Any]]
Flow: TypeAlias = Generator[Step, Rows, Any]

_JOB_COLUMNS = [c.name for c in jobs.columns]
_MAX_RACES = 8


def job_row(row: Mapping[str, Any]) -> JobRow:
    return JobRow(
        job_id=row["job_id"],
        namespace=row["namespace"],
        key=row["job_key"],
        state=JobState(row["state"]),
        fence=int(row["fence"]),
        owner_attempt=row["owner_attempt"],
        claimed_at=row["claimed_at"],
        lease_until=row["lease_until"],
        fingerprint=row["fingerprint"],
        result_version=row["result_version"],
        result=row["result"],
        error=row["error"],
        retryable=None if row["retryable"] is None else bool(row["retryable"]),
        created_at=int(row["created_at"]),
        updated_at=int(row["updated_at"]),
        finished_at=row["finished_at"],
        retain_until=row["retain_until"],
    )


def _columns(job: JobRow) -> dict[str, Any]:
    values = asdict(job)
    values["job_key"] = values.pop("key")
    values["state"] = job.state.value
    return values


def _answer(rows: Rows) -> StoreAnswer:
    if not rows:
        return StoreAnswer(ok=False, job=None, now=0)
    row = rows[0]
    return StoreAnswer(ok=bool(row["ok"]), job=job_row(row), now=int(row["now"]))


# -- the client-decided flows (SQLite, MariaDB): one transaction each ------------------------

_select_locked = select(*jobs.columns).where(jobs.c.job_id == bindparam("job_id")).with_for_update()
_update_job = update(jobs).where(jobs.c.job_id == bindparam("b_job_id"))
_end_attempt = update(attempts).where(
    and_(
        attempts.c.job_id == bindparam("b_job_id"),
        attempts.c.fence == bindparam("b_fence"),
        attempts.c.outcome == AttemptOutcome.RUNNING.value,
    )
)


def _locked(dialect: SqlDialect, job_id: str) -> Generator[Step, Rows, tuple[JobRow | None, int]]:
    """Lock the job row and read the database clock."""
    rows = yield _select_locked.add_columns(dialect.now.label("now")), {"job_id": job_id}
    if rows:
        return job_row(rows[0]), int(rows[0]["now"])
    rows = yield select(dialect.now.label("now")), {}
    return None, int(rows[0]["now"])


def _client_claim(dialect: SqlDialect, request: ClaimRequest) -> Flow:
    job, now = yield from _locked(dialect, request.job_id)
    action = decide_claim(job, request, now)
    if action not in (ClaimAction.INSERT, ClaimAction.TAKEOVER):
        return StoreAnswer(ok=False, job=job, now=now)
    new = claimed_row(job, request, now)
    if job is None:
        yield jobs.insert(), _columns(new)
    else:
        yield _update_job.values(_columns(new)), {"b_job_id": job.job_id}
        if job.state is JobState.PROCESSING:
            yield (
                _end_attempt.values(outcome=AttemptOutcome.EXPIRED.value, ended_at=now),
                {"b_job_id": job.job_id, "b_fence": job.fence},
            )
    yield (
        attempts.insert(),
        {
            "job_id": new.job_id,
            "fence": new.fence,
            "attempt_id": request.attempt_id,
            "started_at": now,
            "ended_at": None,
            "outcome": AttemptOutcome.RUNNING.value,
            "error": None,
        },
    )
    return StoreAnswer(ok=True, job=new, now=now)


def _client_heartbeat(dialect: SqlDialect, ref: AttemptRef, lease_us: int) -> Flow:
    job, now = yield from _locked(dialect, ref.job_id)
    if job is None or check_write(job, ref, now) is not None:
        return StoreAnswer(ok=False, job=job, now=now)
    new = heartbeat_row(job, lease_us, now)
    yield _update_job.values(lease_until=new.lease_until, updated_at=now), {"b_job_id": ref.job_id}
    return StoreAnswer(ok=True, job=new, now=now)


def _client_finish(dialect: SqlDialect, ref: AttemptRef, completion: Completion) -> Flow:
    job, now = yield from _locked(dialect, ref.job_id)
    if job is None or check_write(job, ref, now) is not None:
        return StoreAnswer(ok=False, job=job, now=now)
    new = finished_row(job, completion, now)
    yield _update_job.values(_columns(new)), {"b_job_id": ref.job_id}
    yield (
        _end_attempt.values(outcome=_outcome(completion), ended_at=now, error=completion.error),
        {"b_job_id": ref.job_id, "b_fence": ref.fence},
    )
    return StoreAnswer(ok=True, job=new, now=now)


def _outcome(completion: Completion) -> str:
    ok = completion.state is JobState.SUCCEEDED
    return (AttemptOutcome.SUCCEEDED if ok else AttemptOutcome.FAILED).value


# -- the server-decided flows (PostgreSQL): one statement each --------------------------------


def _server_claim(request: ClaimRequest) -> Flow:
    params = {
        "job_id": request.job_id,
        "namespace": request.namespace,
        "job_key": request.key,
        "attempt_id": request.attempt_id,
        "lease_us": request.lease_us,
        "fingerprint": request.fingerprint,
        "result_version": request.result_version,
    }
    for _ in range(_MAX_RACES):
        answer = _answer((yield named("postgres", "claim"), params))
        if answer.ok or answer.job is None:
            if answer.job is not None:
                return answer
            continue  # lost the insert race to a claim our snapshot could not see yet
        if decide_claim(answer.job, request, answer.now) not in (
            ClaimAction.INSERT,
            ClaimAction.TAKEOVER,
        ):
            return answer
        # lost a takeover race: our snapshot showed a claimable job another claim just took
    raise StoreUnavailable(
        f"claim of {request.key!r} lost {_MAX_RACES} races in a row to concurrent claims;"
        " retry later"
    )


def _server_write(name: str, ref: AttemptRef, extra: dict[str, Any]) -> Flow:
    return _answer(
        (
            yield (
                named("postgres", name),
                {"job_id": ref.job_id, "fence": ref.fence, "attempt_id": ref.attempt_id, **extra},
            )
        )
    )


# -- the operations ----------------------------------------------------------------------------


def claim(dialect: SqlDialect, request: ClaimRequest) -> Flow:
    if dialect.server_side:
        return _server_claim(request)
    return _client_claim(dialect, request)


def heartbeat(dialect: SqlDialect, ref: AttemptRef, lease_us: int) -> Flow:
    if dialect.server_side:
        return _server_write("heartbeat", ref, {"lease_us": lease_us})
    return _client_heartbeat(dialect, ref, lease_us)


def finish(dialect: SqlDialect, ref: AttemptRef, completion: Completion) -> Flow:
    if dialect.server_side:
        return _server_write(
            "finish",
            ref,
            {
                "state": completion.state.value,
                "result": completion.result,
                "error": completion.error,
                "retryable": completion.retryable,
                "retention_us": completion.retention_us,
                "outcome": _outcome(completion),
            },
        )
    return _client_finish(dialect, ref, completion)


@cache
def _status_query(dialect: SqlDialect) -> Executable:
    a = attempts.c
    return (
        select(
            dialect.now.label("now"),
            *jobs.columns,
            a.fence.label("a_fence"),
            a.attempt_id.label("a_attempt_id"),
            a.started_at.label("a_started_at"),
            a.ended_at.label("a_ended_at"),
            a.outcome.label("a_outcome"),
            a.error.label("a_error"),
        )
        .select_from(jobs.outerjoin(attempts, a.job_id == jobs.c.job_id))
        .where(jobs.c.job_id == bindparam("job_id"))
        .order_by(a.fence)
    )


def status(dialect: SqlDialect, job_id: str) -> Flow:
    """The job and its attempts in one joined read."""
    rows = yield _status_query(dialect), {"job_id": job_id}
    if not rows:
        return None
    history = [
        AttemptRow(
            fence=int(r["a_fence"]),
            attempt_id=r["a_attempt_id"],
            started_at=int(r["a_started_at"]),
            ended_at=r["a_ended_at"],
            outcome=AttemptOutcome(r["a_outcome"]),
            error=r["a_error"],
        )
        for r in rows
        if r["a_fence"] is not None
    ]
    return StoreStatus(job=job_row(rows[0]), attempts=history, now=int(rows[0]["now"]))
