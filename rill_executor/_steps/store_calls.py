"""The job store's calls a step yields, one class per store operation.

A step never holds a store: it yields, say, ``ReadStatus(job_id)`` and is sent what the
store answered. Each call knows its operation on both ports, so the ``Ledger`` performs it
with ``call.on(store)`` and the ``AsyncLedger`` awaits ``call.on_async(store)``, the
async store's twin of the same operation; ``T`` is what either answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from .._store import (
    AsyncStore,
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
    read_statuses_async,
)

__all__ = [
    "LeaseNotices",
    "ListJobs",
    "Purge",
    "ReadStatus",
    "ReadStatuses",
    "ReadStoreId",
    "RecordEvent",
    "Resolve",
    "SettleNotice",
    "StoreCall",
]

T = TypeVar("T")


class StoreCall(Generic[T]):
    """A call of the job store that answers a ``T``."""

    __slots__ = ()

    def on(self, store: Store) -> T:
        raise NotImplementedError

    async def on_async(self, store: AsyncStore) -> T:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class ReadStatus(StoreCall[StoreStatus | None]):
    """The job's record with its attempts (``Store.status``)."""

    job_id: str

    def on(self, store: Store) -> StoreStatus | None:
        return store.status(self.job_id)

    async def on_async(self, store: AsyncStore) -> StoreStatus | None:
        return await store.status(self.job_id)


@dataclass(frozen=True, slots=True)
class ReadStatuses(StoreCall[StatusPage]):
    """A page of whole jobs (``read_statuses``: one read where the store lists them)."""

    query: JobQuery

    def on(self, store: Store) -> StatusPage:
        return read_statuses(store, self.query)

    async def on_async(self, store: AsyncStore) -> StatusPage:
        return await read_statuses_async(store, self.query)


@dataclass(frozen=True, slots=True)
class ReadStoreId(StoreCall[str]):
    """The store's id, which its output objects are written under (``Store.store_id``)."""

    def on(self, store: Store) -> str:
        return store.store_id()

    async def on_async(self, store: AsyncStore) -> str:
        return await store.store_id()


@dataclass(frozen=True, slots=True)
class Resolve(StoreCall[StoreAnswer]):
    """An operator's resolution, fenced (``Store.resolve``)."""

    job_id: str
    resolution: Resolution

    def on(self, store: Store) -> StoreAnswer:
        return store.resolve(self.job_id, self.resolution)

    async def on_async(self, store: AsyncStore) -> StoreAnswer:
        return await store.resolve(self.job_id, self.resolution)


@dataclass(frozen=True, slots=True)
class RecordEvent(StoreCall[bool]):
    """An entry appended to the job's event log (``Store.record_event``)."""

    job_id: str
    event: str

    def on(self, store: Store) -> bool:
        return store.record_event(self.job_id, self.event)

    async def on_async(self, store: AsyncStore) -> bool:
        return await store.record_event(self.job_id, self.event)


@dataclass(frozen=True, slots=True)
class LeaseNotices(StoreCall[NoticeBatch]):
    """Due completion notices leased to ``owner`` (``Store.lease_notices``)."""

    namespace: str
    owner: str
    lease_us: int
    limit: int

    def on(self, store: Store) -> NoticeBatch:
        return store.lease_notices(self.namespace, self.owner, self.lease_us, self.limit)

    async def on_async(self, store: AsyncStore) -> NoticeBatch:
        return await store.lease_notices(self.namespace, self.owner, self.lease_us, self.limit)


@dataclass(frozen=True, slots=True)
class SettleNotice(StoreCall[bool]):
    """How a delivery ended (``Store.settle_notice``)."""

    job_id: str
    settlement: NoticeSettlement

    def on(self, store: Store) -> bool:
        return store.settle_notice(self.job_id, self.settlement)

    async def on_async(self, store: AsyncStore) -> bool:
        return await store.settle_notice(self.job_id, self.settlement)


@dataclass(frozen=True, slots=True)
class ListJobs(StoreCall[JobPage]):
    """A page of the namespace's jobs, without their attempts (``Store.list_jobs``)."""

    query: JobQuery

    def on(self, store: Store) -> JobPage:
        return store.list_jobs(self.query)

    async def on_async(self, store: AsyncStore) -> JobPage:
        return await store.list_jobs(self.query)


@dataclass(frozen=True, slots=True)
class Purge(StoreCall[PurgePage]):
    """Records past retention deleted, or counted (``Store.purge``)."""

    request: PurgeRequest

    def on(self, store: Store) -> PurgePage:
        return store.purge(self.request)

    async def on_async(self, store: AsyncStore) -> PurgePage:
        return await store.purge(self.request)
