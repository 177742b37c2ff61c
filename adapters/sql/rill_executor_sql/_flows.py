"""Each store operation as a sans-IO generator: it yields statements and receives their rows.

``SqlStore`` and ``AsyncSqlStore`` drive the same generators; only their I/O differs.
PostgreSQL runs one server-decided statement per operation (``queries/postgres.sql``, sent
as SQL text straight to the driver's cursor); SQLite and MariaDB run one short transaction
that locks the job row and applies the lifecycle rules of ``rill_executor.store`` in Python,
on the database's clock. PostgreSQL runs such transactions too where a single statement would
buy little: a claim with a watch (engine dispatches only) that finds its job already there,
and leasing notices. A flow whose first statement is ``Raw`` is one driver-level statement;
any other flow is one transaction, or, run with ``transaction=False``, statements that each
commit on their own: the reads, and ``first_claim``, a claim's try before its transaction
(MariaDB's ``peek_claim``, which answers a claim that writes nothing in one unlocked read and
inserts a first claim's job; PostgreSQL's first claim with a watch, one insert).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import asdict, fields, replace
from functools import cache
from operator import itemgetter
from typing import Any, NamedTuple, TypeAlias

from sqlalchemy import (
    BigInteger,
    Executable,
    and_,
    bindparam,
    func,
    literal,
    or_,
    select,
    text,
    true,
    update,
)
from sqlalchemy.dialects import mysql, sqlite

from rill_executor.store import (
    AttemptOutcome,
    AttemptRef,
    AttemptRow,
    ClaimAction,
    ClaimRequest,
    Completion,
    JobPage,
    JobQuery,
    JobRow,
    JobState,
    LeasedNotice,
    NoticeBatch,
    NoticeSettlement,
    PurgePage,
    PurgeRequest,
    Resolution,
    StatusPage,
    StoreAnswer,
    StoreStatus,
    StoreUnavailable,
    appended_event,
    attempt_outcome,
    check_cursor,
    check_resolve,
    check_write,
    claimed_row,
    decide_claim,
    ended_attempt,
    fence_keep_until,
    finished_attempt,
    finished_row,
    heartbeat_row,
    lapse_notices,
    leasable,
    lease_notice,
    outbox_due,
    registered_row,
    resolution_event,
    resolved_attempt,
    resolved_row,
    settle_notice,
    started_attempt,
    superseded_attempt,
    watched_row,
)

from ._dialect import SqlDialect
from ._queries import ANSWER_COLUMNS, PURGE_COLUMNS, STATUS_COLUMNS, named
from ._schema import JSON_COLUMNS, fences, jobs

__all__ = [
    "Flow",
    "Step",
    "claim",
    "finish",
    "heartbeat",
    "lease_notices",
    "record_event",
    "list_jobs",
    "peek_claim",
    "ping",
    "purge",
    "register_output",
    "resolve",
    "settle",
    "status",
]


class Raw(NamedTuple):
    """Driver-level SQL (Postgres) and the names of the columns it answers, in order.
    ``tuples``: the flow reads its rows as the driver's tuples (the answer's columns, by
    place), not as mappings of those names."""

    sql: str
    columns: tuple[str, ...]
    tuples: bool = False


Rows: TypeAlias = Sequence[Mapping[Any, Any]]  # or tuples, for a Raw statement with tuples
Params: TypeAlias = dict[str, Any] | list[dict[str, Any]]  # a list: one executemany
Step: TypeAlias = tuple[Executable | Raw, Params]
Flow: TypeAlias = Generator[Step, Rows, Any]

_MAX_RACES = 8
_LEASED_COLUMNS = ("now", "job_id", "namespace", "job_key", "notice", "result")


@cache
def _raw(name: str) -> Raw:
    columns = {
        "status": STATUS_COLUMNS,
        "purge": PURGE_COLUMNS,
        "settle": ("settled",),
        "lease_notices": _LEASED_COLUMNS,
    }.get(name)
    if columns is None:  # claim and the fenced writes answer (ok, now, job columns…)
        return Raw(named("postgres", name), ANSWER_COLUMNS, tuples=True)
    return Raw(named("postgres", name), columns)


def job_row(row: Mapping[Any, Any]) -> JobRow:
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
        outputs=_json_text(row["outputs"]),
        origin=row["origin"],
        trace=row["trace"],
        watchers=_json_text(row["watchers"]),
        notices=_json_text(row["notices"]),
    )


def _json_text(value: Any) -> str:
    """JSON columns arrive as text (SQLite, MariaDB) or decoded (Postgres jsonb)."""
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _columns(job: JobRow, attempts: str) -> dict[str, Any]:
    return {
        "job_id": job.job_id,
        "namespace": job.namespace,
        "job_key": job.key,
        "state": job.state.value,
        "fence": job.fence,
        "owner_attempt": job.owner_attempt,
        "claimed_at": job.claimed_at,
        "lease_until": job.lease_until,
        "fingerprint": job.fingerprint,
        "result_version": job.result_version,
        "result": job.result,
        "error": job.error,
        "retryable": job.retryable,
        "created_at": job.created_at,
        "updated_at": job.updated_at,
        "finished_at": job.finished_at,
        "retain_until": job.retain_until,
        "attempts": attempts,
        "outputs": job.outputs,
        "origin": job.origin,
        "trace": job.trace,
        **_outbox(job),
    }


def _outbox(job: JobRow) -> dict[str, Any]:
    """The outbox columns: every write of the outbox writes ``notice_due`` with it."""
    return {
        "watchers": job.watchers,
        "notices": job.notices,
        "notice_due": outbox_due(job),
    }


def _outbox_params(dialect: SqlDialect, job: JobRow) -> dict[str, Any]:
    return _bound(dialect, {**_outbox(job), "b_job_id": job.job_id})


def _bound(dialect: SqlDialect, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` for SQLAlchemy statements: JSON as text, or decoded for Postgres jsonb."""
    if dialect.family != "postgresql":
        return params
    return {k: json.loads(v) if k in JSON_COLUMNS else v for k, v in params.items()}


# The job's fields, in JobRow's order, picked by place from an answer's tuple (PostgreSQL:
# the JSON columns arrive as text, integers and booleans as such).
_JOB_FIELDS = {"key": "job_key"}
_pick_job = itemgetter(
    *(ANSWER_COLUMNS.index(_JOB_FIELDS.get(f.name, f.name)) for f in fields(JobRow))
)


def _server_answer(rows: Sequence[Any]) -> StoreAnswer:
    """A PostgreSQL answer: no row (a lost insert race), or (ok, now, job columns…)."""
    if not rows:
        return StoreAnswer(ok=False, job=None, now=0)
    row = rows[0]
    job_id, namespace, key, state, *rest = _pick_job(row)
    return StoreAnswer(
        ok=row[0], job=JobRow(job_id, namespace, key, JobState(state), *rest), now=row[1]
    )


def _answer(rows: Rows) -> StoreAnswer:
    if not rows:
        return StoreAnswer(ok=False, job=None, now=0)
    row = rows[0]
    return StoreAnswer(ok=bool(row["ok"]), job=job_row(row), now=int(row["now"]))


# -- the attempt history: a JSON array in the job row ----------------------------------------


def _appended(history: str, ended: AttemptRow) -> str:
    """The history with ``ended`` (an entry the lifecycle rules ended) appended."""
    entries = json.loads(history)
    entries.append(
        {
            "fence": ended.fence,
            "attempt_id": ended.attempt_id,
            "started_at": ended.started_at,
            "ended_at": ended.ended_at,
            "outcome": ended.outcome.value,
            "error": None if ended.error is None else json.loads(ended.error),
            "outputs": json.loads(ended.outputs),
            "origin": None if ended.origin is None else json.loads(ended.origin),
            "trace": ended.trace,
        }
    )
    return json.dumps(entries, separators=(",", ":"))


def _history(job: JobRow, entries: Any) -> list[AttemptRow]:
    """Ended attempts from the stored array, then the running one from the row itself."""
    if isinstance(entries, str):
        entries = json.loads(entries)
    rows = [
        AttemptRow(
            fence=int(e["fence"]),
            attempt_id=e["attempt_id"],
            started_at=int(e["started_at"]),
            ended_at=e["ended_at"],
            outcome=AttemptOutcome(e["outcome"]),
            error=None if e.get("error") is None else json.dumps(e["error"]),
            outputs=json.dumps(e.get("outputs", [])),
            origin=None if e.get("origin") is None else json.dumps(e["origin"]),
            trace=e.get("trace"),
        )
        for e in entries
    ]
    if job.state is JobState.PROCESSING and job.owner_attempt and job.claimed_at is not None:
        rows.append(started_attempt(job))
    return rows


# -- the client-decided flows (SQLite, MariaDB): one transaction each ------------------------


@cache
def _locked_query(dialect: SqlDialect) -> Executable:
    """The database clock and the job row, locked; the clock even when there is no job
    (Postgres locks no row of an outer join: there, a missing job answers no row)."""
    if dialect.family == "postgresql":
        return (
            select(dialect.now.label("now"), *jobs.columns)
            .where(jobs.c.job_id == bindparam("job_id"))
            .with_for_update()
        )
    one = select(literal(1).label("one")).subquery("one")
    return (
        select(dialect.now.label("now"), *jobs.columns)
        .select_from(one.outerjoin(jobs, jobs.c.job_id == bindparam("job_id")))
        .with_for_update()
    )


@cache
def _clock_query(dialect: SqlDialect) -> Executable:
    return select(dialect.now.label("now"))


_insert_job = jobs.insert()
_NOT_REWRITTEN = ("job_id", "events")  # a claim or finish leaves the event log alone
_update_job = (
    update(jobs)
    .where(jobs.c.job_id == bindparam("b_job_id"))
    .values({c.name: bindparam(c.name) for c in jobs.columns if c.name not in _NOT_REWRITTEN})
)
_extend_lease = (
    update(jobs)
    .where(jobs.c.job_id == bindparam("b_job_id"))
    .values(lease_until=bindparam("lease_until"), updated_at=bindparam("updated_at"))
)
_register = (
    update(jobs)
    .where(jobs.c.job_id == bindparam("b_job_id"))
    .values(outputs=bindparam("outputs"), updated_at=bindparam("updated_at"))
)
_write_outbox = (
    update(jobs)
    .where(jobs.c.job_id == bindparam("b_job_id"))
    .values({name: bindparam(name) for name in ("watchers", "notices", "notice_due")})
)


def _locked(
    dialect: SqlDialect, job_id: str
) -> Generator[Step, Rows, tuple[JobRow | None, str, int]]:
    rows = yield _locked_query(dialect), {"job_id": job_id}
    if not rows:
        return None, "[]", (yield from _clock(dialect))
    now = int(rows[0]["now"])
    if rows[0]["job_id"] is None:
        return None, "[]", now
    return job_row(rows[0]), _json_text(rows[0]["attempts"]), now


def _clock(dialect: SqlDialect) -> Generator[Step, Rows, int]:
    (row,) = yield _clock_query(dialect), {}
    return int(row["now"])


def _client_claim(dialect: SqlDialect, request: ClaimRequest) -> Flow:
    job, history, now = yield from _locked(dialect, request.job_id)
    action = decide_claim(job, request, now)
    if action not in (ClaimAction.INSERT, ClaimAction.TAKEOVER):
        watched = None if job is None else watched_row(job, action, request, now)
        if watched is not None:  # the watch waits for the end, or is answered at once
            yield _write_outbox, _outbox_params(dialect, watched)
            job = watched
        return StoreAnswer(ok=False, job=job, now=now)
    last_fence = 0
    if job is None:  # a purged record of the key may have left its fence behind
        found = yield _last_fence, {"job_id": request.job_id}
        last_fence = int(found[0]["fence"]) if found else 0
    new = claimed_row(job, request, now, last_fence)
    if job is None:
        yield _insert_job, _bound(dialect, _columns(new, history))
        return StoreAnswer(ok=True, job=new, now=now)
    if (superseded := superseded_attempt(job, now)) is not None:
        history = _appended(history, superseded)
    yield _update_job, _bound(dialect, {**_columns(new, history), "b_job_id": job.job_id})
    return StoreAnswer(ok=True, job=new, now=now)


_last_fence = select(fences.c.fence).where(fences.c.job_id == bindparam("job_id"))


@cache
def _peek_query(dialect: SqlDialect) -> Executable:
    """The clock, the job row and the fence a purged record of the key left, in one read
    without a lock: one snapshot, so a purge (which deletes the job and keeps its fence in
    one transaction) shows either its job or its fence."""
    one = select(literal(1).label("one")).subquery("one")
    return select(
        dialect.now.label("now"),
        *jobs.columns,
        _last_fence.scalar_subquery().label("last_fence"),
    ).select_from(one.outerjoin(jobs, jobs.c.job_id == bindparam("job_id")))


def peek_claim(dialect: SqlDialect, request: ClaimRequest) -> Flow:
    """MariaDB's claim, begun outside a transaction (each statement commits on its own).

    A claim that writes nothing (a replay, a live owner, a conflict) is answered from one
    read without a lock, as PostgreSQL's ``rill_claim`` answers it: the newest committed row
    at that instant, with nothing to end afterwards. A key with no job gets its job in one
    INSERT after that read; a concurrent first claim of the key makes it a duplicate key (a
    race: the claim runs again and reads that job). The fence continues from the one this
    read found, as the locked transaction's separate read of it did. Anything else (a
    takeover, a watch to write) answers None: the caller runs ``claim``, which decides again
    on the row locked.
    """
    (row,) = yield _peek_query(dialect), {"job_id": request.job_id}
    now = int(row["now"])
    if row["job_id"] is None:
        new = claimed_row(None, request, now, int(row["last_fence"] or 0))
        yield _insert_job, _bound(dialect, _columns(new, "[]"))
        return StoreAnswer(ok=True, job=new, now=now)
    job = job_row(row)
    action = decide_claim(job, request, now)
    if action is ClaimAction.TAKEOVER or watched_row(job, action, request, now) is not None:
        return None
    return StoreAnswer(ok=False, job=job, now=now)


def _client_write(
    dialect: SqlDialect,
    ref: AttemptRef,
    change: Callable[[JobRow, int], JobRow],
    statement: Executable,
    written: tuple[str, ...],
) -> Flow:
    """A fenced write of a few columns: the owner's live lease, or nothing."""
    job, _, now = yield from _locked(dialect, ref.job_id)
    if job is None or check_write(job, ref, now) is not None:
        return StoreAnswer(ok=False, job=job, now=now)
    new = change(job, now)
    columns = _columns(new, "")
    yield (
        statement,
        {"b_job_id": ref.job_id, **{name: columns[name] for name in written}},
    )
    return StoreAnswer(ok=True, job=new, now=now)


def _client_finish(dialect: SqlDialect, ref: AttemptRef, completion: Completion) -> Flow:
    job, history, now = yield from _locked(dialect, ref.job_id)
    if job is None or check_write(job, ref, now) is not None:
        return StoreAnswer(ok=False, job=job, now=now)
    new = finished_row(job, completion, now)
    history = _appended(history, finished_attempt(job, completion, now))
    yield _update_job, _bound(dialect, {**_columns(new, history), "b_job_id": ref.job_id})
    return StoreAnswer(ok=True, job=new, now=now)


# -- the server-decided flows (PostgreSQL): one statement each --------------------------------


def _claim_params(request: ClaimRequest) -> dict[str, Any]:
    return {
        "job_id": request.job_id,
        "namespace": request.namespace,
        "job_key": request.key,
        "attempt_id": request.attempt_id,
        "lease_us": request.lease_us,
        "fingerprint": request.fingerprint,
        "result_version": request.result_version,
        "origin": request.origin,
        "trace": request.trace,
        "watch": request.watch,
    }


def _watched_insert(request: ClaimRequest) -> Flow:
    """PostgreSQL's claim with a watch, begun outside a transaction: a key with no job gets
    its job, watched, in one statement (``rill_claim``); anything else answers None, and
    the caller runs ``claim``, which decides on the row locked (a watch for a replay or a
    running job, a takeover) as the other dialects do."""
    answer = _server_answer((yield _raw("claim_call"), _claim_params(request)))
    return answer if answer.ok else None


def _server_claim(request: ClaimRequest) -> Flow:
    params = _claim_params(request)
    for _ in range(_MAX_RACES):
        answer = _server_answer((yield _raw("claim_call"), params))
        if answer.job is None:
            continue  # lost the insert race to a claim our snapshot could not see yet
        if answer.ok or decide_claim(answer.job, request, answer.now) not in (
            ClaimAction.INSERT,
            ClaimAction.TAKEOVER,
        ):
            return answer
        # lost a takeover race: our snapshot showed a claimable job another claim just took
    raise StoreUnavailable(
        f"claim of {request.key!r} lost {_MAX_RACES} races in a row to concurrent claims;"
        " retry later",
        applied=False,
    )


def _server_write(name: str, ref: AttemptRef, extra: dict[str, Any]) -> Flow:
    params = {"job_id": ref.job_id, "fence": ref.fence, "attempt_id": ref.attempt_id, **extra}
    return _server_answer((yield _raw(name), params))


# -- the operations ----------------------------------------------------------------------------

_PING = Raw("SELECT 1", ("one",))
_SELECT_1 = text("SELECT 1")


def ping(dialect: SqlDialect) -> Flow:
    """``SELECT 1``, sent the way the dialect's operations go: the benchmark's floor."""
    yield (_PING if dialect.server_side else _SELECT_1), {}


def claims_first_outside(dialect: SqlDialect, request: ClaimRequest) -> bool:
    """Whether ``request`` is tried first outside a transaction (``first_claim``)."""
    return dialect.autocommit_pool or (dialect.server_side and request.watch is not None)


def first_claim(dialect: SqlDialect, request: ClaimRequest) -> Flow:
    """A claim's try outside a transaction: its answer, or None for ``claim`` to decide."""
    if dialect.autocommit_pool:
        return peek_claim(dialect, request)
    return _watched_insert(request)


def claim(dialect: SqlDialect, request: ClaimRequest) -> Flow:
    if dialect.server_side and request.watch is None:
        return _server_claim(request)
    return _client_claim(dialect, request)


def heartbeat(dialect: SqlDialect, ref: AttemptRef, lease_us: int) -> Flow:
    if dialect.server_side:
        return _server_write("heartbeat", ref, {"lease_us": lease_us})
    return _client_write(
        dialect,
        ref,
        lambda job, now: heartbeat_row(job, lease_us, now),
        _extend_lease,
        ("lease_until", "updated_at"),
    )


def register_output(dialect: SqlDialect, ref: AttemptRef, output: str) -> Flow:
    if dialect.server_side:
        return _server_write("register_output", ref, {"output": output})
    return _client_write(
        dialect,
        ref,
        lambda job, now: registered_row(job, output, now),
        _register,
        ("outputs", "updated_at"),
    )


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
                "outcome": attempt_outcome(completion).value,
                "outputs": completion.outputs,
            },
        )
    return _client_finish(dialect, ref, completion)


@cache
def _status_query(dialect: SqlDialect) -> Executable:
    return select(dialect.now.label("now"), *jobs.columns).where(
        jobs.c.job_id == bindparam("job_id")
    )


def status(dialect: SqlDialect, job_id: str) -> Flow:
    """The job and its whole history: one row."""
    query = _raw("status") if dialect.server_side else _status_query(dialect)
    rows = yield query, {"job_id": job_id}
    if not rows:
        return None
    job = job_row(rows[0])
    return StoreStatus(
        job=job,
        attempts=_history(job, rows[0]["attempts"]),
        now=int(rows[0]["now"]),
        events=_json_text(rows[0]["events"]),
    )


_write_events = (
    update(jobs).where(jobs.c.job_id == bindparam("b_job_id")).values(events=bindparam("events"))
)


_resolve_job = (
    update(jobs)
    .where(jobs.c.job_id == bindparam("b_job_id"))
    .values({c.name: bindparam(c.name) for c in jobs.columns if c.name != "job_id"})
)


def resolve(dialect: SqlDialect, job_id: str, resolution: Resolution) -> Flow:
    """An operator's resolution, decided in a short transaction on the locked row."""
    rows = yield _locked_query(dialect), {"job_id": job_id}
    if not rows or rows[0]["job_id"] is None:
        now = int(rows[0]["now"]) if rows else (yield from _clock(dialect))
        return StoreAnswer(ok=False, job=None, now=now)
    job, now = job_row(rows[0]), int(rows[0]["now"])
    if check_resolve(job, resolution, now) is not None:
        return StoreAnswer(ok=False, job=job, now=now)
    history = _json_text(rows[0]["attempts"])
    ending = resolved_attempt(job, now)
    if ending is not None:
        history = _appended(history, ended_attempt(job, ending, now))
    event = resolution_event(job, resolution, now)
    events = appended_event(_json_text(rows[0]["events"]), event, now)
    new = resolved_row(job, resolution, now)
    params = {**_columns(new, history), "events": events, "b_job_id": job_id}
    yield _resolve_job, _bound(dialect, params)
    return StoreAnswer(ok=True, job=new, now=now)


def record_event(dialect: SqlDialect, job_id: str, event: str) -> Flow:
    """Append to the job's event log in a short transaction; False when there is no job."""
    rows = yield _locked_query(dialect), {"job_id": job_id}
    if not rows or rows[0]["job_id"] is None:
        return False
    events = appended_event(_json_text(rows[0]["events"]), event, int(rows[0]["now"]))
    yield _write_events, _bound(dialect, {"b_job_id": job_id, "events": events})
    return True


# Listed columns: the record without its history (the biggest column) and result.
_LISTED = [c for c in jobs.columns if c.name not in ("attempts",)]


@cache
def _list_query(
    dialect: SqlDialect,
    states: int,
    dangling: bool,
    idle: bool,
    version: bool,
    after: bool,
    whole: bool = False,
) -> Executable:
    """One page in job id order. The page is chosen in a subquery of its own, so the
    namespace index gives it in order and the scan stops at the page's end (joined as it
    is found, the jobs would be sorted whole for every page); the one-row clock is joined
    to it, so the store's time comes back even with no job: one statement, whatever the
    page holds. ``whole`` reads the attempt history too."""
    now = dialect.now
    where = [jobs.c.namespace == bindparam("namespace")]
    if states:
        where.append(jobs.c.state.in_([bindparam(f"state{i}") for i in range(states)]))
    if dangling:
        processing = JobState.PROCESSING.value
        where += [jobs.c.state == processing, jobs.c.lease_until <= now]
    if idle:
        where.append(jobs.c.updated_at <= now - bindparam("idle_us"))
    if version:
        where.append(jobs.c.result_version == bindparam("result_version"))
    if after:
        where.append(jobs.c.job_id > bindparam("after"))
    page = (
        select(*(jobs.columns if whole else _LISTED))
        .where(*where)
        .order_by(jobs.c.job_id)
        .limit(bindparam("limit"))
        .subquery("page")
    )
    clock = select(now.label("now")).subquery("clock")
    return (
        select(clock.c.now, *page.c)
        .select_from(clock.outerjoin(page, true()))
        .order_by(page.c.job_id)
    )


_next_namespace = select(func.min(jobs.c.namespace).label("name")).where(
    jobs.c.namespace > bindparam("after")
)


def namespaces(limit: int) -> Flow:
    """Up to ``limit`` namespaces that have jobs, in order: one probe of the namespace
    index each (a loose index scan), however many jobs a namespace holds."""
    found: list[str] = []
    while len(found) < limit:
        rows = yield _next_namespace, {"after": found[-1] if found else ""}
        name = rows[0]["name"] if rows else None
        if name is None:
            break
        found.append(str(name))
    return found


def _listing(
    dialect: SqlDialect, query: JobQuery, whole: bool
) -> tuple[Executable, dict[str, Any]]:
    """The statement and parameters of a page: one row more than the page says whether
    another page follows."""
    check_cursor(query.after)
    params: dict[str, Any] = {"namespace": query.namespace, "limit": query.limit + 1}
    params |= {f"state{i}": state.value for i, state in enumerate(query.states)}
    if query.idle_us is not None:
        params["idle_us"] = query.idle_us
    if query.result_version is not None:
        params["result_version"] = query.result_version
    if query.after is not None:
        params["after"] = query.after
    statement = _list_query(
        dialect,
        len(query.states),
        query.dangling,
        query.idle_us is not None,
        query.result_version is not None,
        query.after is not None,
        whole,
    )
    return statement, params


def list_jobs(dialect: SqlDialect, query: JobQuery) -> Flow:
    """A page of a namespace's jobs: one statement."""
    rows = yield _listing(dialect, query, whole=False)
    now = int(rows[0]["now"])
    found = [job_row(row) for row in rows if row["job_id"] is not None]
    page = found[: query.limit]
    return JobPage(page, page[-1].job_id if len(found) > query.limit else None, now)


def _whole(row: Mapping[str, Any], now: int) -> StoreStatus:
    job = job_row(row)
    return StoreStatus(job, _history(job, row["attempts"]), now, _json_text(row["events"]))


def list_statuses(dialect: SqlDialect, query: JobQuery) -> Flow:
    """A page of a namespace's jobs read whole, as ``status`` reads one: one statement."""
    rows = yield _listing(dialect, query, whole=True)
    now = int(rows[0]["now"])
    found = [row for row in rows if row["job_id"] is not None]
    page = [_whole(row, now) for row in found[: query.limit]]
    more = len(found) > query.limit
    return StatusPage(page, page[-1].job.job_id if more else None, now)


# -- purging records past retention -------------------------------------------------------------

_PROCESSING = JobState.PROCESSING.value
_PICKED = (
    jobs.c.job_id,
    jobs.c.namespace,
    jobs.c.state,
    jobs.c.fence,
    jobs.c.finished_at,
    jobs.c.retain_until,
    jobs.c.notice_due,
)


@cache
def _purge_pick(dialect: SqlDialect, after: bool, lock: bool) -> Executable:
    """The first ``limit`` of a namespace's records past retention (``past_retention``)
    after the cursor, in job id order; to delete, locked, skipping rows a claim holds."""
    now = bindparam("now", type_=BigInteger)
    dangling_us = bindparam("dangling_us", type_=BigInteger)
    where = [
        jobs.c.namespace == bindparam("namespace"),
        or_(
            and_(
                jobs.c.state != _PROCESSING,
                func.coalesce(jobs.c.retain_until, 0) <= now,
                or_(  # a record a redo released is kept as a dangling one (``released``)
                    func.coalesce(jobs.c.retain_until, 0) != func.coalesce(jobs.c.finished_at, 0),
                    func.coalesce(jobs.c.finished_at, 0) + dangling_us <= now,
                ),
            ),
            and_(
                jobs.c.state == _PROCESSING,
                func.coalesce(jobs.c.lease_until, 0) + dangling_us <= now,
            ),
        ),
    ]
    if after:
        where.append(jobs.c.job_id > bindparam("after"))
    query = select(*_PICKED).where(*where).order_by(jobs.c.job_id).limit(bindparam("limit"))
    return query.with_for_update(skip_locked=True) if lock else query


_delete_jobs = jobs.delete().where(jobs.c.job_id.in_(bindparam("ids", expanding=True)))
_delete_fences = fences.delete().where(fences.c.job_id.in_(bindparam("ids", expanding=True)))


@cache
def _keep_fences(dialect: SqlDialect) -> Executable:
    """Write a purged job's last fence, replacing an older one of the key (SQLite and
    MariaDB: PostgreSQL purges in one statement, ``purge`` in ``postgres.sql``)."""
    if dialect.family == "mysql":
        ins = mysql.insert(fences)
        return ins.on_duplicate_key_update(
            fence=ins.inserted.fence, keep_until=ins.inserted.keep_until
        )
    ups = sqlite.insert(fences)
    return ups.on_conflict_do_update(
        index_elements=[fences.c.job_id],
        set_={"fence": ups.excluded.fence, "keep_until": ups.excluded.keep_until},
    )


@cache
def _expired_fences(dialect: SqlDialect) -> Executable:
    """Fences kept for their whole retention: the next claim may start over at 1."""
    return (
        select(fences.c.job_id)
        .where(
            fences.c.namespace == bindparam("namespace"), fences.c.keep_until <= bindparam("now")
        )
        .order_by(fences.c.keep_until)
        .limit(bindparam("limit"))
        .with_for_update(skip_locked=True)
    )


def _picked_row(row: Mapping[Any, Any]) -> JobRow:
    """The few columns ``fence_keep_until`` reads, as a row."""
    return JobRow(
        job_id=row["job_id"],
        namespace=row["namespace"],
        key="",
        state=JobState(row["state"]),
        fence=int(row["fence"]),
        owner_attempt=None,
        claimed_at=None,
        lease_until=None,
        fingerprint="",
        result_version=None,
        result=None,
        error=None,
        retryable=None,
        created_at=0,
        updated_at=0,
        finished_at=row["finished_at"],
        retain_until=row["retain_until"],
    )


def purge(dialect: SqlDialect, request: PurgeRequest) -> Flow:
    check_cursor(request.after)
    if dialect.server_side and not request.dry_run:
        return _server_purge(request)
    return _client_purge(dialect, request)


def _client_purge(dialect: SqlDialect, request: PurgeRequest) -> Flow:
    """One short transaction (a dry run: two reads). A pending notice is a non-null
    ``notice_due`` (``notice_due``), so the rows are picked without their outbox."""
    now = yield from _clock(dialect)
    params: dict[str, Any] = {
        "namespace": request.namespace,
        "now": now,
        "dangling_us": request.dangling_after_us,
        "limit": request.limit,
    }
    if request.after is not None:
        params["after"] = request.after
    pick = _purge_pick(dialect, request.after is not None, not request.dry_run)
    rows = yield pick, params
    doomed = [_picked_row(row) for row in rows if row["notice_due"] is None]
    cursor = rows[-1]["job_id"] if len(rows) == request.limit else None
    page = PurgePage(len(doomed), len(rows) - len(doomed), cursor, now)
    if request.dry_run:
        return page
    expired = yield _expired_fences(dialect), params
    if expired:
        yield _delete_fences, {"ids": [row["job_id"] for row in expired]}
    if doomed:
        yield _delete_jobs, {"ids": [job.job_id for job in doomed]}
        kept = [
            {
                "job_id": job.job_id,
                "namespace": job.namespace,
                "fence": job.fence,
                "keep_until": fence_keep_until(job, request.dangling_after_us, now),
            }
            for job in doomed
        ]
        yield _keep_fences(dialect), kept
    return page


def _server_purge(request: PurgeRequest) -> Flow:
    params = {
        "namespace": request.namespace,
        "after": request.after or "",
        "dangling_us": request.dangling_after_us,
        "limit": request.limit,
    }
    ((row,)) = yield _raw("purge"), params
    return PurgePage(int(row["purged"]), int(row["kept"]), row["cursor"], int(row["now"]))


# -- the outbox: short transactions (PostgreSQL: one statement each) ----------------------------


def _due_query(dialect: SqlDialect, limit: int) -> Executable:
    """Up to ``limit`` jobs of a namespace with a leasable notice, earliest first, locked;
    rows another deliverer holds are skipped (SQLite: one writer, nothing to skip)."""
    return (
        select(dialect.now.label("now"), *jobs.columns)
        .where(jobs.c.namespace == bindparam("namespace"), jobs.c.notice_due <= dialect.now)
        .order_by(jobs.c.notice_due)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )


def lease_notices(
    dialect: SqlDialect, namespace: str, owner: str, lease_us: int, limit: int
) -> Flow:
    if dialect.server_side:
        return (yield from _server_lease(namespace, owner, lease_us, limit))
    rows = yield _due_query(dialect, limit), {"namespace": namespace}
    now = int(rows[0]["now"]) if rows else (yield from _clock(dialect))
    found, touched = [], set()
    for i, row in enumerate(rows):
        job = job_row(row)
        # A watched job whose owner's lease ran out gets its lapse notice.
        if (lapsed := lapse_notices(job, now)) is not None:
            job = replace(job, notices=lapsed)
            touched.add(i)
        elif outbox_due(job) != row["notice_due"]:
            touched.add(i)  # its owner renewed the lease: looked at again when it ends
        found.append((job, json.loads(job.notices)))
    due = sorted(
        (notice["due"], i, n)
        for i, (_, notices) in enumerate(found)
        for n, notice in enumerate(notices)
        if leasable(notice, now)
    )[:limit]
    leased = []
    for _, i, n in due:
        job, notices = found[i]
        lease_notice(notices[n], owner, lease_us, now)
        notice = json.dumps(notices[n], separators=(",", ":"))
        leased.append(LeasedNotice(job.job_id, job.namespace, job.key, notice, job.result))
        touched.add(i)
    if touched:
        yield (
            _write_outbox,
            [_outbox_params(dialect, _with_notices(*found[i])) for i in sorted(touched)],
        )
    return NoticeBatch(leased, now)


def _server_lease(namespace: str, owner: str, lease_us: int, limit: int) -> Flow:
    """``lease_notices`` in one statement, decided on the server (Postgres)."""
    params = {"namespace": namespace, "owner": owner, "lease_us": lease_us, "limit": limit}
    rows = yield _raw("lease_notices"), params
    leased = [
        LeasedNotice(row["job_id"], row["namespace"], row["job_key"], row["notice"], row["result"])
        for row in rows
        if row["job_id"] is not None
    ]
    return NoticeBatch(leased, int(rows[0]["now"]))


def _with_notices(job: JobRow, notices: list[Any]) -> JobRow:
    return replace(job, notices=json.dumps(notices, separators=(",", ":")))


def settle(dialect: SqlDialect, job_id: str, settlement: NoticeSettlement) -> Flow:
    if dialect.server_side:
        ((row,)) = yield _raw("settle"), {"job_id": job_id, **asdict(settlement)}
        return row["settled"] == 1
    job, _, now = yield from _locked(dialect, job_id)
    settled = None if job is None else settle_notice(job.notices, settlement, now)
    if job is None or settled is None:
        return False  # not its lease (any more): nothing written
    yield _write_outbox, _outbox_params(dialect, replace(job, notices=settled))
    return True
