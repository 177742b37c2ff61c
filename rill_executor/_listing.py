"""Listing a namespace's jobs: which rows a ``JobQuery`` selects, and the public page.

Stores select with ``listed`` (memory, Redis) or the same conditions in SQL; the ledger
builds the query from what the caller asks and turns rows into ``JobSummary`` views.
"""

from __future__ import annotations

import json
import re
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from ._errors import UsageError
from ._records import ErrorInfo, JobRow, JobState, OwnerInfo, at_us, from_us
from ._rules.notices import NoticeStatus, is_unsent
from ._store import JobPage, JobQuery

__all__ = ["JobList", "JobSummary", "dangling", "listed"]

MAX_PAGE = 1000


_CURSOR = re.compile(r"[0-9a-f]{64}")  # a job id: where the last page ended


def check_cursor(after: str | None) -> None:
    """Refuse a cursor no page of a store ordered by job id returned: it would answer an
    empty last page."""
    if after is not None and not _CURSOR.fullmatch(after):
        raise UsageError(
            f"cursor {after!r} is not one this store returned: pass a page's cursor as it"
            " came, or none to start from the first page"
        )


def dangling(job: JobRow, now: int) -> bool:
    """``processing`` with its lease run out on the store's clock: the owner is gone (or
    late), and the next claim takes the job over."""
    return job.state is JobState.PROCESSING and (job.lease_until or 0) <= now


def listed(job: JobRow, query: JobQuery, now: int) -> bool:
    """Whether ``query`` selects ``job`` (cursor aside)."""
    return (
        job.namespace == query.namespace
        and (not query.states or job.state in query.states)
        and (not query.dangling or dangling(job, now))
        and (query.idle_us is None or job.updated_at <= now - query.idle_us)
        and (query.result_version is None or job.result_version == query.result_version)
    )


def check_query(query: JobQuery) -> JobQuery:
    limit = query.limit
    if not isinstance(limit, int) or isinstance(limit, bool) or not 0 < limit <= MAX_PAGE:
        raise UsageError(f"limit must be an int from 1 to {MAX_PAGE}, got {limit!r}")
    if query.after is not None and (not isinstance(query.after, str) or not query.after):
        raise UsageError(f"cursor must be the text a previous page returned, got {query.after!r}")
    return query


class JobSummary(BaseModel):
    """One job of a listing: its record without the attempt history."""

    model_config = ConfigDict(frozen=True)

    namespace: str
    key: str
    state: JobState
    dangling: bool  # processing, and the owner's lease has run out
    fence: int
    result_version: str | None
    owner: OwnerInfo | None
    error: ErrorInfo | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    retain_until: datetime | None
    pending_notices: int  # completion notices not yet delivered or dropped
    unsent_notices: int = 0  # of those, given back unsent by every deliverer that leased them

    @classmethod
    def build(cls, job: JobRow, now: int) -> JobSummary:
        notices = json.loads(job.notices or "[]")
        return cls(
            namespace=job.namespace,
            key=job.key,
            state=job.state,
            dangling=dangling(job, now),
            fence=job.fence,
            result_version=job.result_version,
            owner=OwnerInfo.of(job, now),
            error=ErrorInfo.from_json(job.error),
            created_at=at_us(job.created_at),
            updated_at=at_us(job.updated_at),
            finished_at=from_us(job.finished_at),
            retain_until=from_us(job.retain_until),
            pending_notices=sum(n["status"] == NoticeStatus.PENDING for n in notices),
            unsent_notices=sum(is_unsent(n) for n in notices),
        )


class JobList(BaseModel):
    """A page of jobs; pass ``cursor`` back (``after=``) for the next, None after the last."""

    model_config = ConfigDict(frozen=True)

    jobs: tuple[JobSummary, ...]
    cursor: str | None
    store_time: datetime

    @classmethod
    def build(cls, page: JobPage) -> JobList:
        return cls(
            jobs=tuple(JobSummary.build(job, page.now) for job in page.jobs),
            cursor=page.cursor,
            store_time=at_us(page.now),
        )
