"""The in-memory store: for unit tests of services built on the ledger, and the reference.

It keeps the same contract as the real stores (the conformance kit runs against it) within
one process. Its clock is a monotonic clock anchored to the wall clock once at creation, so,
like a database's, it does not follow later changes of the caller's clock: the process's own
(``clock``: any ``Clock``, e.g. a test's ``VirtualClock``).
"""

from __future__ import annotations

import asyncio
import copy
import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ._clock import SYSTEM_CLOCK, Clock, checked_clock
from ._listing import check_cursor, listed
from ._records import AttemptOutcome, AttemptRow, JobRow
from ._rules.decisions import (
    ClaimAction,
    check_write,
    claimed_row,
    decide_claim,
    ended_attempt,
    finished_attempt,
    finished_row,
    heartbeat_row,
    registered_row,
    started_attempt,
    superseded_attempt,
    watched_row,
)
from ._rules.events import appended_event
from ._rules.notices import lapse_notices, leasable, lease_notice, settle_notice
from ._rules.purge import fence_keep_until, purge_batch
from ._rules.resolution import check_resolve, resolution_event, resolved_attempt, resolved_row
from ._store import (
    AttemptRef,
    ClaimRequest,
    Completion,
    JobPage,
    JobQuery,
    LeasedNotice,
    NoticeBatch,
    NoticeSettlement,
    PurgePage,
    PurgeRequest,
    Resolution,
    StatusPage,
    StoreAnswer,
    StoreStatus,
)

__all__ = ["AsyncMemoryStore", "MemoryStore", "open_memory", "open_memory_async"]


class _Standing:
    """The clock of a view frozen in time (``_with_clock_offset``): it never moves."""

    @staticmethod
    def monotonic_ns() -> int:
        return 0

    @staticmethod
    def time_ns() -> int:
        return 0

    @staticmethod
    def sleep(seconds: float) -> None:
        pass

    @staticmethod
    async def asleep(seconds: float) -> None:
        pass

    @staticmethod
    def wait(condition: threading.Condition, until_ns: int | None) -> None:
        if until_ns is None or until_ns > 0:  # a time that never comes: only a notify ends it
            condition.wait()

    @staticmethod
    def loop_call_at(
        loop: asyncio.AbstractEventLoop, when_ns: int, callback: Callable[[], object]
    ) -> None:
        if when_ns <= 0:
            loop.call_soon_threadsafe(callback)


_STANDING = _Standing()


class MemoryStore:
    kind = "memory"

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._lock = threading.Lock()
        self._clock = clock = checked_clock(clock)
        self._jobs: dict[str, JobRow] = {}
        self._attempts: dict[str, list[AttemptRow]] = {}
        self._events: dict[str, str] = {}
        # What purged records leave: job id -> (namespace, last fence, kept until).
        self._fences: dict[str, tuple[str, int, int]] = {}
        self._anchor_wall = clock.time_ns() // 1000
        self._anchor_mono = clock.monotonic_ns() // 1000
        self._id = uuid.uuid4().hex  # its data lives and dies with this instance

    def store_id(self) -> str:
        return self._id

    def ping(self) -> None:
        """No server to reach: the floor is what every operation pays first, its lock."""
        with self._lock:
            pass

    def _now(self) -> int:
        return self._anchor_wall + self._clock.monotonic_ns() // 1000 - self._anchor_mono

    def _with_clock_offset(self, offset_us: int, *, frozen: bool = False) -> MemoryStore:
        """A view of this store's records (and lock) whose clock reads ``offset_us`` later,
        or, ``frozen``, stands at ``offset_us``: the test hook of
        ``rill_executor.testing.with_clock_offset`` and ``with_frozen_clock``."""
        view = copy.copy(self)
        view._anchor_wall = self._anchor_wall + offset_us
        if frozen:
            view._anchor_wall, view._anchor_mono, view._clock = offset_us, 0, _STANDING
        return view

    def claim(self, request: ClaimRequest) -> StoreAnswer:
        with self._lock:
            now = self._now()
            job = self._jobs.get(request.job_id)
            action = decide_claim(job, request, now)
            if action not in (ClaimAction.INSERT, ClaimAction.TAKEOVER):
                watched = None if job is None else watched_row(job, action, request, now)
                if watched is not None:
                    job = self._jobs[request.job_id] = watched
                return StoreAnswer(ok=False, job=job, now=now)
            last_fence = self._fences.get(request.job_id, ("", 0, 0))[1]
            new = claimed_row(job, request, now, last_fence)
            attempts = self._attempts.setdefault(request.job_id, [])
            if (superseded := superseded_attempt(job, now)) is not None:
                self._end_attempt(attempts, superseded)
            attempts.append(started_attempt(new))
            self._jobs[request.job_id] = new
            return StoreAnswer(ok=True, job=new, now=now)

    def heartbeat(self, ref: AttemptRef, lease_us: int) -> StoreAnswer:
        return self._write(ref, lambda job, now: heartbeat_row(job, lease_us, now))

    def register_output(self, ref: AttemptRef, output: str) -> StoreAnswer:
        return self._write(ref, lambda job, now: registered_row(job, output, now))

    def _write(self, ref: AttemptRef, change: Callable[[JobRow, int], JobRow]) -> StoreAnswer:
        with self._lock:
            now = self._now()
            job = self._jobs.get(ref.job_id)
            if job is None or check_write(job, ref, now) is not None:
                return StoreAnswer(ok=False, job=job, now=now)
            new = self._jobs[ref.job_id] = change(job, now)
            return StoreAnswer(ok=True, job=new, now=now)

    def finish(self, ref: AttemptRef, completion: Completion) -> StoreAnswer:
        with self._lock:
            now = self._now()
            job = self._jobs.get(ref.job_id)
            if job is None or check_write(job, ref, now) is not None:
                return StoreAnswer(ok=False, job=job, now=now)
            new = self._jobs[ref.job_id] = finished_row(job, completion, now)
            self._end_attempt(self._attempts[ref.job_id], finished_attempt(job, completion, now))
            return StoreAnswer(ok=True, job=new, now=now)

    def status(self, job_id: str) -> StoreStatus | None:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                return None
            attempts = list(self._attempts.get(job_id, ()))
            return StoreStatus(job, attempts, self._now(), self._events.get(job_id, "[]"))

    def record_event(self, job_id: str, event: str) -> bool:
        with self._lock:
            if job_id not in self._jobs:
                return False
            self._events[job_id] = appended_event(self._events.get(job_id), event, self._now())
            return True

    def resolve(self, job_id: str, resolution: Resolution) -> StoreAnswer:
        with self._lock:
            now, job = self._now(), self._jobs.get(job_id)
            if job is None or check_resolve(job, resolution, now) is not None:
                return StoreAnswer(ok=False, job=job, now=now)
            ending = resolved_attempt(job, now)
            if ending is not None:
                self._end_attempt(self._attempts[job_id], ended_attempt(job, ending, now))
            event = resolution_event(job, resolution, now)
            self._events[job_id] = appended_event(self._events.get(job_id), event, now)
            new = self._jobs[job_id] = resolved_row(job, resolution, now)
            return StoreAnswer(ok=True, job=new, now=now)

    def lease_notices(self, namespace: str, owner: str, lease_us: int, limit: int) -> NoticeBatch:
        with self._lock:
            now = self._now()
            found: dict[str, list[dict[str, Any]]] = {}  # each job's notices, read once
            due: list[tuple[int, str, str]] = []
            for job_id, row in self._jobs.items():
                if row.namespace != namespace:
                    continue
                job = row
                if lapsed := lapse_notices(row, now):
                    job = self._jobs[job_id] = replace(row, notices=lapsed)
                if '"pending"' in job.notices:  # none can be leased otherwise: not parsed
                    notices = found[job_id] = json.loads(job.notices)
                    due += ((n["due"], job_id, n["id"]) for n in notices if leasable(n, now))
            due.sort()
            leased: list[LeasedNotice] = []
            for _, job_id, notice_id in due[:limit]:
                job = self._jobs[job_id]
                notice = next(n for n in found[job_id] if n["id"] == notice_id)
                lease_notice(notice, owner, lease_us, now)
                leased.append(
                    LeasedNotice(job_id, job.namespace, job.key, json.dumps(notice), job.result)
                )
            for job_id in dict.fromkeys(notice.job_id for notice in leased):  # one write a job
                self._jobs[job_id] = replace(self._jobs[job_id], notices=json.dumps(found[job_id]))
            return NoticeBatch(leased, now)

    def settle_notice(self, job_id: str, settlement: NoticeSettlement) -> bool:
        with self._lock:
            now, job = self._now(), self._jobs.get(job_id)
            settled = None if job is None else settle_notice(job.notices, settlement, now)
            if job is None or settled is None:
                return False
            self._jobs[job_id] = replace(job, notices=settled)
            return True

    def namespaces(self, limit: int = 20) -> list[str]:
        """Up to ``limit`` namespaces that have jobs, in order."""
        with self._lock:
            return sorted({job.namespace for job in self._jobs.values()})[:limit]

    def list_jobs(self, query: JobQuery) -> JobPage:
        check_cursor(query.after)
        with self._lock:
            now = self._now()
            found = sorted(
                (job_id, job)
                for job_id, job in self._jobs.items()
                if (query.after is None or job_id > query.after) and listed(job, query, now)
            )
        page = [job for _, job in found[: query.limit]]
        more = len(found) > query.limit
        return JobPage(page, page[-1].job_id if more else None, now)

    def list_statuses(self, query: JobQuery) -> StatusPage:
        page = self.list_jobs(query)
        with self._lock:  # a job purged since the listing is left out, as a scan leaves it
            statuses = [self._whole(job.job_id, page.now) for job in page.jobs]
        found = [status for status in statuses if status is not None]
        return StatusPage(found, page.cursor, page.now)

    def _whole(self, job_id: str, now: int) -> StoreStatus | None:
        job = self._jobs.get(job_id)
        if job is None:
            return None
        attempts = list(self._attempts.get(job_id, ()))
        return StoreStatus(job, attempts, now, self._events.get(job_id, "[]"))

    def purge(self, request: PurgeRequest) -> PurgePage:
        check_cursor(request.after)
        with self._lock:
            now = self._now()
            doomed, kept, cursor = purge_batch(self._jobs.values(), request, now)
            if request.dry_run:
                return PurgePage(len(doomed), kept, cursor, now)
            for job in doomed:
                keep = fence_keep_until(job, request.dangling_after_us, now)
                self._fences[job.job_id] = (job.namespace, job.fence, keep)
                del self._jobs[job.job_id]
                self._attempts.pop(job.job_id, None)
                self._events.pop(job.job_id, None)
            for job_id, fence in list(self._fences.items()):  # in place: views share it
                if fence[0] == request.namespace and fence[2] <= now:
                    del self._fences[job_id]
            return PurgePage(len(doomed), kept, cursor, now)

    def close(self) -> None:
        pass

    @staticmethod
    def _end_attempt(attempts: list[AttemptRow], ended: AttemptRow) -> None:
        for i, attempt in enumerate(attempts):
            if attempt.fence == ended.fence and attempt.outcome is AttemptOutcome.RUNNING:
                attempts[i] = ended


class AsyncMemoryStore:
    """The asyncio face of a ``MemoryStore`` (pass one in to share its records)."""

    kind = "memory"

    def __init__(self, store: MemoryStore | None = None) -> None:
        self.sync = store or MemoryStore()

    async def store_id(self) -> str:
        return self.sync.store_id()

    async def ping(self) -> None:
        self.sync.ping()

    async def claim(self, request: ClaimRequest) -> StoreAnswer:
        return self.sync.claim(request)

    async def heartbeat(self, ref: AttemptRef, lease_us: int) -> StoreAnswer:
        return self.sync.heartbeat(ref, lease_us)

    async def register_output(self, ref: AttemptRef, output: str) -> StoreAnswer:
        return self.sync.register_output(ref, output)

    async def finish(self, ref: AttemptRef, completion: Completion) -> StoreAnswer:
        return self.sync.finish(ref, completion)

    async def status(self, job_id: str) -> StoreStatus | None:
        return self.sync.status(job_id)

    async def record_event(self, job_id: str, event: str) -> bool:
        return self.sync.record_event(job_id, event)

    async def resolve(self, job_id: str, resolution: Resolution) -> StoreAnswer:
        return self.sync.resolve(job_id, resolution)

    async def lease_notices(
        self, namespace: str, owner: str, lease_us: int, limit: int
    ) -> NoticeBatch:
        return self.sync.lease_notices(namespace, owner, lease_us, limit)

    async def settle_notice(self, job_id: str, settlement: NoticeSettlement) -> bool:
        return self.sync.settle_notice(job_id, settlement)

    async def list_jobs(self, query: JobQuery) -> JobPage:
        return self.sync.list_jobs(query)

    async def list_statuses(self, query: JobQuery) -> StatusPage:
        return self.sync.list_statuses(query)

    async def purge(self, request: PurgeRequest) -> PurgePage:
        return self.sync.purge(request)

    async def close(self) -> None:
        pass


def open_memory(url: str) -> MemoryStore:
    return MemoryStore()


def open_memory_async(url: str) -> AsyncMemoryStore:
    return AsyncMemoryStore()
