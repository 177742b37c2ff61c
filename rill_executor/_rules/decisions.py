"""The store-side rules of the lifecycle, free of I/O: what a claim decides, what each
write makes of the job row, and what each makes of the attempts' history entries.

Stores that decide in the client (memory, SQLite, MariaDB) call these inside their atomic
section and only persist what they return; stores that decide server-side (the Postgres
statement, the Redis scripts) encode the same rules, and the conformance kit holds them all
to the same behaviour.
"""

from __future__ import annotations

import enum
import json
from dataclasses import replace

from .._records import AttemptOutcome, AttemptRow, JobRow, JobState
from .._store import AttemptRef, ClaimRequest, Completion
from .notices import add_watch, finish_notices, replay_notice

__all__ = [
    "ClaimAction",
    "WriteRejection",
    "already_finished",
    "attempt_outcome",
    "check_write",
    "claimed_row",
    "decide_claim",
    "ended_attempt",
    "ended_outputs",
    "finished_attempt",
    "finished_row",
    "heartbeat_row",
    "owned_by",
    "registered_row",
    "started_attempt",
    "superseded_attempt",
    "watched_row",
]


class ClaimAction(enum.Enum):
    INSERT = "insert"  # no record: fence 1
    TAKEOVER = "takeover"  # retryable failure, expired lease, or retention passed: fence + 1
    REPLAY = "replay"
    IN_PROGRESS = "in_progress"
    CONFLICT = "conflict"


def decide_claim(job: JobRow | None, request: ClaimRequest, now: int) -> ClaimAction:
    if job is None:
        return ClaimAction.INSERT
    if job.state is not JobState.PROCESSING and (job.retain_until or 0) <= now:
        return ClaimAction.TAKEOVER  # retention passed: the old record no longer binds
    if job.fingerprint != request.fingerprint or job.result_version != request.result_version:
        return ClaimAction.CONFLICT
    if job.state is JobState.SUCCEEDED:
        return ClaimAction.REPLAY
    if job.state is JobState.FAILED:
        return ClaimAction.TAKEOVER if job.retryable else ClaimAction.REPLAY
    if job.lease_until is not None and job.lease_until > now:
        return ClaimAction.IN_PROGRESS
    return ClaimAction.TAKEOVER


def claimed_row(job: JobRow | None, request: ClaimRequest, now: int, last_fence: int = 0) -> JobRow:
    """The job as it stands after an INSERT or TAKEOVER by ``request``; an INSERT continues
    from ``last_fence``, the fence a purged record of the key left behind (see ``purge``)."""
    return JobRow(
        job_id=request.job_id,
        namespace=request.namespace,
        key=request.key,
        state=JobState.PROCESSING,
        fence=(last_fence if job is None else job.fence) + 1,
        owner_attempt=request.attempt_id,
        claimed_at=now,
        lease_until=now + request.lease_us,
        fingerprint=request.fingerprint,
        result_version=request.result_version,
        result=None,
        error=None,
        retryable=None,
        created_at=now if job is None else job.created_at,
        updated_at=now,
        finished_at=None,
        retain_until=None,
        outputs="[]",
        origin=request.origin,
        trace=request.trace,
        watchers=add_watch(job.watchers if job else "{}", request.watch),
        notices=job.notices if job else "[]",
    )


def watched_row(job: JobRow, action: ClaimAction, request: ClaimRequest, now: int) -> JobRow | None:
    """What a claim that did not claim the job writes for its watch, or None: a running job
    keeps the watch until its finish; an ended one answers it with a notice at once."""
    if request.watch is None:
        return None
    if action is ClaimAction.IN_PROGRESS:
        return replace(job, watchers=add_watch(job.watchers, request.watch))
    if action is ClaimAction.REPLAY:
        notices = replay_notice(
            job.notices, request.watch, job.fence, job.state.value, job.error, now
        )
        return replace(job, notices=notices)
    return None


# -- the attempt history: what each claim and finish does to the attempts' entries --------


def started_attempt(row: JobRow) -> AttemptRow:
    """The attempt a claim starts, running, as the claimed ``row`` shows it."""
    assert row.owner_attempt is not None and row.claimed_at is not None
    return AttemptRow(
        row.fence,
        row.owner_attempt,
        row.claimed_at,
        None,
        AttemptOutcome.RUNNING,
        None,
        origin=row.origin,
        trace=row.trace,
    )


def superseded_attempt(job: JobRow | None, now: int) -> AttemptRow | None:
    """The entry of the attempt a claim takes ``job`` over from, or None if it ran none: a
    running owner ends ``expired``, its outputs all uncommitted."""
    if job is None or job.state is not JobState.PROCESSING:
        return None
    return ended_attempt(job, AttemptOutcome.EXPIRED, now)


def finished_attempt(job: JobRow, completion: Completion, now: int) -> AttemptRow:
    """The entry of the owner's attempt as ``completion`` ends it."""
    return ended_attempt(
        job, attempt_outcome(completion), now, error=completion.error, committed=completion.outputs
    )


def attempt_outcome(completion: Completion) -> AttemptOutcome:
    ok = completion.state is JobState.SUCCEEDED
    return AttemptOutcome.SUCCEEDED if ok else AttemptOutcome.FAILED


def ended_attempt(
    job: JobRow,
    outcome: AttemptOutcome,
    now: int,
    *,
    error: str | None = None,
    committed: str = "[]",
) -> AttemptRow:
    """The entry of ``job``'s owner's attempt, ended as ``outcome`` with the ``committed``
    outputs (the rest of those it registered are kept as uncommitted)."""
    assert job.owner_attempt is not None
    return AttemptRow(
        job.fence,
        job.owner_attempt,
        job.claimed_at or job.updated_at,
        now,
        outcome,
        error,
        ended_outputs(job.outputs, committed),
        origin=job.origin,
        trace=job.trace,
    )


class WriteRejection(enum.StrEnum):
    MISSING = "missing"
    SUPERSEDED = "superseded"
    FINISHED = "finished"
    LEASE_EXPIRED = "lease_expired"


def check_write(job: JobRow | None, ref: AttemptRef, now: int) -> WriteRejection | None:
    """Why a write by ``ref`` must be rejected, or None if ``ref`` owns a live lease."""
    if job is None:
        return WriteRejection.MISSING
    if job.fence != ref.fence or job.owner_attempt != ref.attempt_id:
        return WriteRejection.SUPERSEDED
    if job.state is not JobState.PROCESSING:
        return WriteRejection.FINISHED
    if job.lease_until is None or job.lease_until <= now:
        return WriteRejection.LEASE_EXPIRED
    return None


def owned_by(job: JobRow | None, request: ClaimRequest, now: int) -> bool:
    """Whether ``job`` is held, live, by ``request``'s own attempt for the same work: what a
    claim resent after a lost reply finds when its first send was applied."""
    return (
        job is not None
        and job.state is JobState.PROCESSING
        and job.owner_attempt == request.attempt_id
        and job.fingerprint == request.fingerprint
        and job.result_version == request.result_version
        and job.lease_until is not None
        and job.lease_until > now
    )


def already_finished(job: JobRow | None, ref: AttemptRef, completion: Completion) -> bool:
    """Whether ``job`` shows ``completion`` applied by ``ref`` itself: a finish resent by the
    same attempt, at the same fence, with the same completion (a lost reply), not a
    conflicting one."""
    return (
        job is not None
        and job.fence == ref.fence
        and job.owner_attempt == ref.attempt_id
        and job.state is completion.state
        and job.result == completion.result
        and job.error == completion.error
        and bool(job.retryable) == bool(completion.retryable)
    )


def heartbeat_row(job: JobRow, lease_us: int, now: int) -> JobRow:
    return replace(job, lease_until=now + lease_us, updated_at=now)


def registered_row(job: JobRow, output: str, now: int) -> JobRow:
    outputs = json.loads(job.outputs)
    outputs.append(json.loads(output))
    return replace(job, outputs=json.dumps(outputs, separators=(",", ":")), updated_at=now)


def ended_outputs(registered: str, committed: str) -> str:
    """An ended attempt's outputs: the committed refs, then the registered rest, uncommitted."""
    if registered == committed == "[]":
        return "[]"  # the common case, without reading or writing JSON
    refs = [{**ref, "committed": True} for ref in json.loads(committed)]
    done = {ref["key"] for ref in refs}
    rest = [{**o, "committed": False} for o in json.loads(registered) if o["key"] not in done]
    return json.dumps(refs + rest, separators=(",", ":"))


def finished_row(job: JobRow, completion: Completion, now: int) -> JobRow:
    notices = finish_notices(
        job.notices, job.watchers, job.fence, completion.state.value, completion.error, now
    )
    return replace(
        job,
        outputs="[]",
        watchers="{}",
        notices=notices,
        state=completion.state,
        lease_until=None,
        result=completion.result,
        error=completion.error,
        retryable=completion.retryable,
        updated_at=now,
        finished_at=now,
        retain_until=now + completion.retention_us,
    )
