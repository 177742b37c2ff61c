"""Deleting records past retention (``purge``): which records go, what they leave behind.

A record is past retention when it ended and its ``retain_until`` passed, or when it is
still ``processing`` and its owner's lease ran out at least ``dangling_after_us`` ago (the
owner died); a record a redo released waits for its next claim as long, from its redo.
It is kept while a completion notice waits for delivery (invariant 10 in docs/concepts.md).
A deleted record leaves its last fence behind for one retention, so the next claim of its
key continues from it and fences never repeat. Stores decide with these rules
(memory, SQLite, MariaDB) or encode the same ones (the PostgreSQL statement, Redis scripts).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from .._errors import UsageError
from .._records import JobRow, JobState, at_us
from .._store import PurgePage, PurgeRequest
from .notices import outbox_due

__all__ = [
    "MAX_PURGE_BATCH",
    "PurgeReport",
    "PurgeVerdict",
    "check_purge",
    "fence_keep_until",
    "has_pending_notice",
    "past_retention",
    "purge_batch",
    "purge_verdict",
    "released",
]

MAX_PURGE_BATCH = 10_000


class PurgeVerdict(enum.Enum):
    KEEP = "keep"  # within retention
    KEEP_NOTICE = "keep_notice"  # past retention, but a notice is still to be delivered
    PURGE = "purge"


def released(job: JobRow) -> bool:
    """A record a redo released (``retain_until = finished_at``): it binds nothing, and
    waits for the next claim with the operator's who and why on record."""
    if job.state is JobState.PROCESSING or job.retain_until is None:
        return False
    return job.retain_until == job.finished_at


def past_retention(job: JobRow, dangling_after_us: int, now: int) -> bool:
    """Ended and past ``retain_until``, or dangling for at least ``dangling_after_us``; a
    record a redo released is kept as a dangling one is, ``dangling_after_us`` after it."""
    if job.state is JobState.PROCESSING:
        return (job.lease_until or 0) + dangling_after_us <= now
    if released(job):
        return (job.finished_at or 0) + dangling_after_us <= now
    return (job.retain_until or 0) <= now


def has_pending_notice(job: JobRow) -> bool:
    """A notice still to deliver, or watches of a processing job that its lapse notice
    will answer (``outbox_due``): deleting the record would leave a dispatch waiting."""
    return outbox_due(job) is not None


def purge_verdict(job: JobRow, dangling_after_us: int, now: int) -> PurgeVerdict:
    if not past_retention(job, dangling_after_us, now):
        return PurgeVerdict.KEEP
    return PurgeVerdict.KEEP_NOTICE if has_pending_notice(job) else PurgeVerdict.PURGE


def fence_keep_until(job: JobRow, dangling_after_us: int, now: int) -> int:
    """Until when the deleted record's last fence is kept: one retention from now (the
    record's own, ``retain_until - finished_at``, for an ended job; ``dangling_after_us``
    for a dangling one), and never less than ``dangling_after_us``."""
    kept = dangling_after_us
    if job.state is not JobState.PROCESSING and job.retain_until and job.finished_at:
        kept = max(kept, job.retain_until - job.finished_at)
    return now + kept


def purge_batch(
    jobs: Iterable[JobRow], request: PurgeRequest, now: int
) -> tuple[list[JobRow], int, str | None]:
    """From ``jobs``, the batch one ``purge`` call deletes, how many it keeps for a pending
    notice, and the cursor: the first ``limit`` of the namespace's records past retention
    after the cursor, in job id order. The cursor is the last of them when the batch is
    full (there may be more), else None."""
    batch = sorted(
        (
            job
            for job in jobs
            if job.namespace == request.namespace
            and (request.after is None or job.job_id > request.after)
            and past_retention(job, request.dangling_after_us, now)
        ),
        key=lambda job: job.job_id,
    )[: request.limit]
    doomed = [job for job in batch if not has_pending_notice(job)]
    cursor = batch[-1].job_id if len(batch) == request.limit else None
    return doomed, len(batch) - len(doomed), cursor


def check_purge(request: PurgeRequest) -> PurgeRequest:
    """``request``, or ``UsageError`` saying which field is wrong."""
    limit = request.limit
    if not isinstance(limit, int) or isinstance(limit, bool) or not 0 < limit <= MAX_PURGE_BATCH:
        raise UsageError(f"limit must be an int from 1 to {MAX_PURGE_BATCH}, got {limit!r}")
    if request.after is not None and (not isinstance(request.after, str) or not request.after):
        raise UsageError(
            f"cursor must be the text a previous purge returned, got {request.after!r}"
        )
    return request


class PurgeReport(BaseModel):
    """What one ``purge`` call did: ``purged`` records deleted (a dry run: that would be),
    ``kept_notices`` past retention but kept for a pending completion notice. Pass
    ``cursor`` back (``after=``) for the next batch; None once the namespace is done."""

    model_config = ConfigDict(frozen=True)

    purged: int
    kept_notices: int
    cursor: str | None
    store_time: datetime
    dry_run: bool = False

    @classmethod
    def build(cls, page: PurgePage, *, dry_run: bool) -> PurgeReport:
        return cls(
            purged=page.purged,
            kept_notices=page.kept_notices,
            cursor=page.cursor,
            store_time=at_us(page.now),
            dry_run=dry_run,
        )
