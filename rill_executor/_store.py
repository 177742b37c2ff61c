"""The store port: what a job store must do, sync (``Store``) and asyncio (``AsyncStore``).

Every method is one atomic, fenced operation and should cost the store one round trip.
Stores judge time on their own clock and report it (``now``, microseconds since the epoch)
with every answer. They apply no policy: keys, fingerprints, retention and serialisation are
decided by the ledger, which hands stores finished values. An adapter is done when the
conformance kit in ``rill_executor.testing`` passes against a real server.

Every store has an identity (``store_id``): a stable random id, created once together with
the store's data (e.g. ``uuid4().hex``, stored in the database) and read once when the store
is opened, never per operation. Output objects carry it in their keys, so two job stores
sharing one output prefix never collect each other's objects. Two opens of the same data
answer the same identity; a store with other data (another database, file or Redis
database) answers another one.

A store may name its system in a ``kind`` attribute (``postgresql``, ``redis``…): spans and
metrics carry it as ``rill.store.kind``. It must never hold an address or a credential.
A store whose operations wait on a server for a bounded time may state the longest of
those bounds in a ``longest_wait`` attribute (seconds): an engine integration refuses a
lease shorter than twice that (``check_lease``: ``ConfigError``), since an operation stuck
until its bound ran out (a transaction left open, holding the job's row) could otherwise
outlive the lease.

One method is optional: ``ping`` (``Pingable`` / ``AsyncPingable``), the cheapest round trip
the store's server answers, sent on the store's own connection or pool. It decides nothing
and touches no record; ``rill-executor bench`` measures it as the floor its figures are
ratios to, and reports "no floor" for a store without it.

Another is optional too: ``list_statuses`` (``StatusLister`` / ``AsyncStatusLister``), a page
of a namespace's jobs read whole, attempts and event log included. The drill report
(``rill-executor audit``) reads a namespace with it in one read a page; a store without it
is read as before, one ``status`` a job.

Adapters are found by URL scheme through the entry-point groups ``rill_executor.stores`` and
``rill_executor.async_stores``; each entry point names a callable ``(url: str) -> store``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ._records import AttemptRow, JobRow, JobState

__all__ = [
    "AsyncPingable",
    "AsyncStore",
    "AttemptRef",
    "ClaimRequest",
    "Completion",
    "JobPage",
    "JobQuery",
    "LeasedNotice",
    "NoticeBatch",
    "NoticeSettlement",
    "Pingable",
    "PurgePage",
    "PurgeRequest",
    "Resolution",
    "Store",
    "StoreAnswer",
    "StatusLister",
    "AsyncStatusLister",
    "StatusPage",
    "StoreStatus",
    "read_statuses",
    "read_statuses_async",
]


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    job_id: str
    namespace: str
    key: str
    fingerprint: str
    result_version: str | None
    attempt_id: str
    lease_us: int
    origin: str | None = None  # JSON: what the attempt answers; kept in its history entry
    watch: str | None = None  # JSON {"id", "target"}: a dispatch to notify when the job ends
    trace: str | None = None  # W3C traceparent of the attempt's span; kept like ``origin``


@dataclass(frozen=True, slots=True)
class AttemptRef:
    """Identity of one owning attempt: what every fenced write carries."""

    job_id: str
    attempt_id: str
    fence: int


@dataclass(frozen=True, slots=True)
class Completion:
    """The end of an attempt: a committed result or a failure."""

    state: JobState  # SUCCEEDED or FAILED
    result: str | None  # JSON text, for SUCCEEDED
    error: str | None  # JSON text of ErrorInfo, for FAILED
    retryable: bool | None  # for FAILED
    retention_us: int
    outputs: str = "[]"  # JSON: the OutputRefs committed with a SUCCEEDED result


@dataclass(frozen=True, slots=True)
class Resolution:
    """An operator's decision on a job (see ``rill_executor._rules.resolution``): ``action``
    ``reuse`` (the committed result, or ``result``), ``redo`` (the next claim runs the work)
    or ``terminate`` (a terminal failure, ``error``); who decided it and why."""

    action: str
    reason: str
    actor: str
    force: bool  # act on a job whose lease is live (its owner is fenced off)
    result: str | None  # JSON text: the result to commit, for reuse
    error: str | None  # JSON text of ErrorInfo: the recorded failure, for redo and terminate
    retention_us: int


@dataclass(frozen=True, slots=True)
class StoreAnswer:
    """What a claim or write did: ``ok`` if it claimed / was applied; the job as it stands."""

    ok: bool
    job: JobRow | None
    now: int


@dataclass(frozen=True, slots=True)
class LeasedNotice:
    """A notice leased for delivery, with what it needs to be sent."""

    job_id: str
    namespace: str
    key: str
    notice: str  # JSON: the notice as leased (see ``rill_executor.store`` notices)
    result: str | None  # JSON: the job's committed result, for a notice of success


@dataclass(frozen=True, slots=True)
class NoticeBatch:
    notices: list[LeasedNotice]
    now: int


@dataclass(frozen=True, slots=True)
class NoticeSettlement:
    """How a delivery ended: ``status`` delivered, dropped, or pending again after
    ``retry_in_us``; ``outcome`` and ``detail`` say what the receiver answered. ``tried``
    False: the deliverer gave the notice back unsent (it may not send it), so its lease
    does not count as a try."""

    notice_id: str
    owner: str
    status: str
    outcome: str
    detail: str | None = None
    retry_in_us: int = 0
    tried: bool = True


@dataclass(frozen=True, slots=True)
class JobQuery:
    """Which jobs of ``namespace`` to list (``list_jobs``), one page at a time.

    Every filter given must hold (see ``rill_executor.store.listed``): ``states``, one of
    these states (empty: any); ``dangling``, ``processing`` with its lease run out on the
    store's clock; ``idle_us``, not updated for at least that long; ``result_version``,
    that version. ``after`` is the cursor the previous page returned (None: the first page).
    """

    namespace: str
    states: tuple[JobState, ...] = ()
    dangling: bool = False
    idle_us: int | None = None
    result_version: str | None = None
    after: str | None = None
    limit: int = 100


@dataclass(frozen=True, slots=True)
class JobPage:
    """One page of a listing: ``cursor`` asks for the next one, None after the last."""

    jobs: list[JobRow]
    cursor: str | None
    now: int


@dataclass(frozen=True, slots=True)
class PurgeRequest:
    """Which of ``namespace``'s records to delete (``purge``): those past retention."""

    namespace: str
    dangling_after_us: int  # a processing job whose lease ran out at least this long ago counts too
    limit: int = 1000  # at most this many records per call
    after: str | None = None  # the cursor the previous call returned
    dry_run: bool = False  # count what would be deleted, delete nothing


@dataclass(frozen=True, slots=True)
class PurgePage:
    """What one ``purge`` call did; ``cursor`` asks for the next call, None after the last."""

    purged: int  # records deleted (dry run: that would be)
    kept_notices: int  # past retention but kept because a completion notice is still pending
    cursor: str | None  # call again with it; None when the namespace was gone through
    now: int


@dataclass(frozen=True, slots=True)
class StoreStatus:
    job: JobRow
    attempts: list[AttemptRow]
    now: int
    events: str = "[]"  # JSON: the job's event log (see ``rill_executor._rules.events``)


@dataclass(frozen=True, slots=True)
class StatusPage:
    """One page of ``list_statuses``: whole jobs; ``cursor`` as ``JobPage.cursor``."""

    statuses: list[StoreStatus]
    cursor: str | None
    now: int


@runtime_checkable
class Store(Protocol):
    def store_id(self) -> str:
        """This store's identity (see the module docs): no round trip after the open."""

    def claim(self, request: ClaimRequest) -> StoreAnswer:
        """Claim the job if it is free (see ``decide_claim``, ``claimed_row``); else return
        it, untouched unless the request carries a watch (``watched_row``)."""

    def heartbeat(self, ref: AttemptRef, lease_us: int) -> StoreAnswer:
        """Extend the owner's live lease to now + ``lease_us``; else change nothing."""

    def register_output(self, ref: AttemptRef, output: str) -> StoreAnswer:
        """Append ``output`` (JSON: name, key, uri) to the owner's registered outputs
        (``JobRow.outputs``), under the same fence and live-lease check as a heartbeat."""

    def finish(self, ref: AttemptRef, completion: Completion) -> StoreAnswer:
        """Commit or fail for the owner with a live lease, attempt history included.

        The ended attempt's history entry lists its outputs (``ended_outputs``): the
        committed refs, and every other registered output as uncommitted; and its
        ``origin``. The job's watches become notices in the same write (``finished_row``)."""

    def status(self, job_id: str) -> StoreStatus | None:
        """The job, all its attempts and its event log, read together."""

    def record_event(self, job_id: str, event: str) -> bool:
        """Append ``event`` (a JSON object) to the job's event log stamped with the store's
        time (``appended_event``), in one atomic write that changes nothing else; False,
        writing nothing, when there is no such job."""

    def resolve(self, job_id: str, resolution: Resolution) -> StoreAnswer:
        """Apply an operator's resolution if ``check_resolve`` allows it, atomically: the
        job as ``resolved_row`` leaves it (fence bumped, so no earlier owner can write
        again), a running owner's attempt ended as ``resolved_attempt`` says, and
        ``resolution_event`` appended to the event log; else change nothing."""

    def lease_notices(self, namespace: str, owner: str, lease_us: int, limit: int) -> NoticeBatch:
        """Lease up to ``limit`` of the namespace's due notices (``leasable``) to ``owner``
        until now + ``lease_us`` (``lease_notice``), earliest due first, atomically: two
        deliverers never hold one notice at once. First, each watched job still processing
        whose owner's lease ran out gets its lapse notice (``lapse_notices``); a store that
        indexes due jobs scores them by ``outbox_due``, so such a job is found when its
        lease ends, and a purge keeps it (``has_pending_notice``)."""

    def settle_notice(self, job_id: str, settlement: NoticeSettlement) -> bool:
        """Settle a leased notice (``settle_notice``) if ``settlement.owner`` still holds its
        lease; False, writing nothing, otherwise."""

    def list_jobs(self, query: JobQuery) -> JobPage:
        """A page of the namespace's jobs that ``query`` selects (``listed``), without
        their attempts, and the cursor of the next page. Reads only; one round trip where
        the store can (SQL: one statement ordered by job id, at most ``limit`` rows). A
        store that can only scan (Redis) returns each scan step's matches whole, so a page
        may hold a few more than ``limit`` jobs and a job changed during the listing may
        appear twice; a job that matches throughout is listed at least once."""

    def purge(self, request: PurgeRequest) -> PurgePage:
        """Delete up to ``request.limit`` of the namespace's records past retention
        (``purgeable``) after the cursor, in job id order, and return the next cursor.

        A record with a pending completion notice is kept and counted (``kept_notices``).
        The key's last fence outlives its record (``keep_until``, one retention after the
        delete): a later claim of the key takes fence = that + 1, so fences never repeat.
        Never waits on a live claim (SQL: ``SKIP LOCKED``; a skipped row is left for the
        next run). ``dry_run`` counts, deleting nothing. A store that can only scan (Redis)
        may look at more than ``limit`` records per call, and delete no more than them."""

    def close(self) -> None: ...


@runtime_checkable
class AsyncStore(Protocol):
    async def store_id(self) -> str:
        """As ``Store.store_id``; a store that opens lazily reads it when it opens."""

    async def claim(self, request: ClaimRequest) -> StoreAnswer: ...

    async def heartbeat(self, ref: AttemptRef, lease_us: int) -> StoreAnswer: ...

    async def register_output(self, ref: AttemptRef, output: str) -> StoreAnswer: ...

    async def finish(self, ref: AttemptRef, completion: Completion) -> StoreAnswer: ...

    async def status(self, job_id: str) -> StoreStatus | None: ...

    async def record_event(self, job_id: str, event: str) -> bool: ...

    async def resolve(self, job_id: str, resolution: Resolution) -> StoreAnswer: ...

    async def lease_notices(
        self, namespace: str, owner: str, lease_us: int, limit: int
    ) -> NoticeBatch: ...

    async def settle_notice(self, job_id: str, settlement: NoticeSettlement) -> bool: ...

    async def list_jobs(self, query: JobQuery) -> JobPage: ...

    async def purge(self, request: PurgeRequest) -> PurgePage: ...

    async def close(self) -> None: ...


@runtime_checkable
class Pingable(Protocol):
    """The optional part of ``Store`` (see the module docs)."""

    def ping(self) -> None:
        """The cheapest round trip the server answers (SQL ``SELECT 1``, Redis ``PING``),
        sent the way the store's operations are: the same connection or pool, the same
        driver, and whatever that path itself adds to every call. No record is read or
        written. A store without a server (in memory) returns at once."""


@runtime_checkable
class AsyncPingable(Protocol):
    """The optional part of ``AsyncStore``: ``ping`` as ``Pingable.ping``."""

    async def ping(self) -> None: ...


@runtime_checkable
class StatusLister(Protocol):
    """The optional part of ``Store`` that reads a namespace whole (see the module docs)."""

    def list_statuses(self, query: JobQuery) -> StatusPage:
        """As ``list_jobs`` (the same selection, pages and cursors), each job read whole as
        ``status`` reads it: the job, all its attempts and its event log. Reads only; one
        round trip a page where the store can (a scanning store: one a scan step)."""


@runtime_checkable
class AsyncStatusLister(Protocol):
    """The optional part of ``AsyncStore``: ``list_statuses`` as ``StatusLister``'s."""

    async def list_statuses(self, query: JobQuery) -> StatusPage: ...


def read_statuses(store: Store, query: JobQuery) -> StatusPage:
    """A page of whole jobs: ``list_statuses`` where ``store`` has it, else the listing's
    page and one ``status`` a job (a job gone since the listing is left out)."""
    if isinstance(store, StatusLister):
        return store.list_statuses(query)
    page = store.list_jobs(query)
    statuses = [found for job in page.jobs if (found := store.status(job.job_id)) is not None]
    return StatusPage(statuses, page.cursor, page.now)


async def read_statuses_async(store: AsyncStore, query: JobQuery) -> StatusPage:
    """As ``read_statuses``, for an ``AsyncStore``."""
    if isinstance(store, AsyncStatusLister):
        return await store.list_statuses(query)
    page = await store.list_jobs(query)
    statuses = []
    for job in page.jobs:
        if (found := await store.status(job.job_id)) is not None:
            statuses.append(found)
    return StatusPage(statuses, page.cursor, page.now)
