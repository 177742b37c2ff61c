"""The in-memory store: for unit tests of services built on the ledger, and the reference.

It keeps the same contract as the real stores (the conformance kit runs against it) within
one process. Its clock is the process's monotonic clock anchored to the wall clock once at
creation, so, like a database's, it does not follow later changes of the caller's clock.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace

from ._decisions import (
    ClaimAction,
    check_write,
    claimed_row,
    decide_claim,
    ended_outputs,
    finished_row,
    heartbeat_row,
    registered_row,
)
from ._records import AttemptOutcome, AttemptRow, JobRow, JobState
from ._store import AttemptRef, ClaimRequest, Completion, StoreAnswer, StoreStatus

__all__ = ["AsyncMemoryStore", "MemoryStore", "open_memory", "open_memory_async"]


class MemoryStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, JobRow] = {}
        self._attempts: dict[str, list[AttemptRow]] = {}
        self._anchor_wall = time.time_ns() // 1000
        self._anchor_mono = time.monotonic_ns() // 1000
        self._id = uuid.uuid4().hex  # its data lives and dies with this instance

    def store_id(self) -> str:
        return self._id

    def _now(self) -> int:
        return self._anchor_wall + time.monotonic_ns() // 1000 - self._anchor_mono

    def claim(self, request: ClaimRequest) -> StoreAnswer:
        with self._lock:
            now = self._now()
            job = self._jobs.get(request.job_id)
            action = decide_claim(job, request, now)
            if action not in (ClaimAction.INSERT, ClaimAction.TAKEOVER):
                return StoreAnswer(ok=False, job=job, now=now)
            new = claimed_row(job, request, now)
            attempts = self._attempts.setdefault(request.job_id, [])
            if job is not None and job.state is JobState.PROCESSING:
                outputs = ended_outputs(job.outputs, "[]")
                self._end_attempt(attempts, job.fence, AttemptOutcome.EXPIRED, now, None, outputs)
            attempts.append(
                AttemptRow(new.fence, request.attempt_id, now, None, AttemptOutcome.RUNNING, None)
            )
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
            outcome = (
                AttemptOutcome.SUCCEEDED
                if completion.state is JobState.SUCCEEDED
                else AttemptOutcome.FAILED
            )
            outputs = ended_outputs(job.outputs, completion.outputs)
            self._end_attempt(
                self._attempts[ref.job_id], ref.fence, outcome, now, completion.error, outputs
            )
            return StoreAnswer(ok=True, job=new, now=now)

    def status(self, job_id: str) -> StoreStatus | None:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                return None
            return StoreStatus(job, list(self._attempts.get(job_id, ())), self._now())

    def close(self) -> None:
        pass

    @staticmethod
    def _end_attempt(
        attempts: list[AttemptRow],
        fence: int,
        outcome: AttemptOutcome,
        now: int,
        error: str | None,
        outputs: str,
    ) -> None:
        for i, attempt in enumerate(attempts):
            if attempt.fence == fence and attempt.outcome is AttemptOutcome.RUNNING:
                attempts[i] = replace(
                    attempt, outcome=outcome, ended_at=now, error=error, outputs=outputs
                )


class AsyncMemoryStore:
    """The asyncio face of a ``MemoryStore`` (pass one in to share its records)."""

    def __init__(self, store: MemoryStore | None = None) -> None:
        self.sync = store or MemoryStore()

    async def store_id(self) -> str:
        return self.sync.store_id()

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

    async def close(self) -> None:
        pass


def open_memory(url: str) -> MemoryStore:
    return MemoryStore()


def open_memory_async(url: str) -> AsyncMemoryStore:
    return AsyncMemoryStore()
