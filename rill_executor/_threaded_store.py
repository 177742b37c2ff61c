"""``ThreadedAsyncStore``: a synchronous store used from asyncio, one worker thread per call."""

from __future__ import annotations

import asyncio

from ._store import (
    AttemptRef,
    ClaimRequest,
    Completion,
    JobPage,
    JobQuery,
    NoticeBatch,
    NoticeSettlement,
    PurgePage,
    PurgeRequest,
    Resolution,
    StatusPage,
    Store,
    StoreAnswer,
    StoreStatus,
    read_statuses,
)

__all__ = ["ThreadedAsyncStore"]


class ThreadedAsyncStore:
    """An ``AsyncStore`` over a synchronous one: each call runs in a worker thread."""

    def __init__(self, store: Store) -> None:
        self.sync = store

    async def store_id(self) -> str:
        return self.sync.store_id()  # read at open: no I/O

    async def claim(self, request: ClaimRequest) -> StoreAnswer:
        return await asyncio.to_thread(self.sync.claim, request)

    async def heartbeat(self, ref: AttemptRef, lease_us: int) -> StoreAnswer:
        return await asyncio.to_thread(self.sync.heartbeat, ref, lease_us)

    async def register_output(self, ref: AttemptRef, output: str) -> StoreAnswer:
        return await asyncio.to_thread(self.sync.register_output, ref, output)

    async def finish(self, ref: AttemptRef, completion: Completion) -> StoreAnswer:
        return await asyncio.to_thread(self.sync.finish, ref, completion)

    async def status(self, job_id: str) -> StoreStatus | None:
        return await asyncio.to_thread(self.sync.status, job_id)

    async def record_event(self, job_id: str, event: str) -> bool:
        return await asyncio.to_thread(self.sync.record_event, job_id, event)

    async def resolve(self, job_id: str, resolution: Resolution) -> StoreAnswer:
        return await asyncio.to_thread(self.sync.resolve, job_id, resolution)

    async def lease_notices(
        self, namespace: str, owner: str, lease_us: int, limit: int
    ) -> NoticeBatch:
        return await asyncio.to_thread(self.sync.lease_notices, namespace, owner, lease_us, limit)

    async def settle_notice(self, job_id: str, settlement: NoticeSettlement) -> bool:
        return await asyncio.to_thread(self.sync.settle_notice, job_id, settlement)

    async def list_jobs(self, query: JobQuery) -> JobPage:
        return await asyncio.to_thread(self.sync.list_jobs, query)

    async def list_statuses(self, query: JobQuery) -> StatusPage:
        """The sync store's ``list_statuses``, or its listing and each status if it has none."""
        return await asyncio.to_thread(read_statuses, self.sync, query)

    async def purge(self, request: PurgeRequest) -> PurgePage:
        return await asyncio.to_thread(self.sync.purge, request)

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)
