"""Stores: the in-memory ones, the threaded wrapper, the outbox's ``Watch`` and
``DueNotice``, and the public port for store adapters: request/answer types and the
shared lifecycle rules.

An adapter imports only this module (and its own driver). The outbox rules (watches,
notices, their leases: ``add_watch``, ``lease_notice``, ``finish_notices``…) are here too,
the drivers of an adapter's I/O-free flows (``drive``, ``drive_async``: a generator that
yields actions and is sent their answers), the event log's (``appended_event``: the first
``MAX_EVENTS`` reported entries kept, the rest counted) and purging records past
retention (``purge_batch``, ``fence_keep_until``), and the one message refusing a store URL's
unknown option (``unknown_url_option``). What each rule means, and the invariants
a store keeps, are in the concepts page and the conformance kit
(``rill_executor.testing.conformance``).
"""

from ._clock import SYSTEM_CLOCK, Clock, SystemClock
from ._errors import (
    DurabilityWarning,
    IncompatibleStore,
    SchemaMissing,
    StoreError,
    StoreProtocolError,
    StoreUnavailable,
    UnsafeDeployment,
    UsageError,
)
from ._keys import validate_store_id
from ._listing import check_cursor, dangling, listed
from ._memory import AsyncMemoryStore, MemoryStore
from ._recheck import Recheck, callers_level
from ._records import AttemptOutcome, AttemptRow, JobRow, JobState
from ._registry import upgrade_schema
from ._rules.decisions import (
    ClaimAction,
    WriteRejection,
    attempt_outcome,
    check_write,
    claimed_row,
    decide_claim,
    ended_attempt,
    ended_outputs,
    finished_attempt,
    finished_row,
    heartbeat_row,
    registered_row,
    started_attempt,
    superseded_attempt,
    watched_row,
)
from ._rules.events import MAX_EVENTS, appended_event
from ._rules.notices import (
    DueNotice,
    NoticeStatus,
    Watch,
    add_watch,
    finish_notices,
    is_lapse,
    lapse_notices,
    leasable,
    lease_notice,
    notice_due,
    outbox_due,
    replay_notice,
    settle_notice,
)
from ._rules.purge import (
    PurgeVerdict,
    fence_keep_until,
    has_pending_notice,
    past_retention,
    purge_batch,
    purge_verdict,
)
from ._rules.resolution import (
    ResolveAction,
    ResolveRefusal,
    check_resolve,
    resolution_event,
    resolved_attempt,
    resolved_row,
)
from ._steps.drive import drive, drive_async
from ._store import (
    AsyncPingable,
    AsyncStatusLister,
    AsyncStore,
    AttemptRef,
    ClaimRequest,
    Completion,
    JobPage,
    JobQuery,
    LeasedNotice,
    NoticeBatch,
    NoticeSettlement,
    Pingable,
    PurgePage,
    PurgeRequest,
    Resolution,
    StatusLister,
    StatusPage,
    Store,
    StoreAnswer,
    StoreStatus,
)
from ._threaded_store import ThreadedAsyncStore
from ._url_options import unknown_url_option

__all__ = [
    "SYSTEM_CLOCK",
    "AsyncMemoryStore",
    "Clock",
    "DueNotice",
    "DurabilityWarning",
    "Recheck",
    "callers_level",
    "UnsafeDeployment",
    "MemoryStore",
    "SystemClock",
    "ThreadedAsyncStore",
    "Watch",
    "unknown_url_option",
    "upgrade_schema",
    "validate_store_id",
    "MAX_EVENTS",
    "AsyncPingable",
    "AsyncStatusLister",
    "AsyncStore",
    "AttemptOutcome",
    "AttemptRef",
    "AttemptRow",
    "ClaimAction",
    "ClaimRequest",
    "Completion",
    "IncompatibleStore",
    "JobPage",
    "JobQuery",
    "JobRow",
    "JobState",
    "LeasedNotice",
    "NoticeBatch",
    "NoticeSettlement",
    "NoticeStatus",
    "Pingable",
    "PurgePage",
    "PurgeRequest",
    "PurgeVerdict",
    "Resolution",
    "ResolveAction",
    "ResolveRefusal",
    "SchemaMissing",
    "StatusLister",
    "StatusPage",
    "Store",
    "StoreAnswer",
    "StoreError",
    "StoreProtocolError",
    "StoreStatus",
    "StoreUnavailable",
    "UsageError",
    "WriteRejection",
    "add_watch",
    "appended_event",
    "attempt_outcome",
    "check_cursor",
    "check_resolve",
    "check_write",
    "claimed_row",
    "dangling",
    "decide_claim",
    "drive",
    "drive_async",
    "ended_attempt",
    "ended_outputs",
    "fence_keep_until",
    "finish_notices",
    "finished_attempt",
    "finished_row",
    "has_pending_notice",
    "heartbeat_row",
    "is_lapse",
    "lapse_notices",
    "lease_notice",
    "leasable",
    "listed",
    "notice_due",
    "outbox_due",
    "past_retention",
    "purge_batch",
    "purge_verdict",
    "registered_row",
    "replay_notice",
    "resolution_event",
    "resolved_attempt",
    "resolved_row",
    "settle_notice",
    "started_attempt",
    "superseded_attempt",
    "watched_row",
]
