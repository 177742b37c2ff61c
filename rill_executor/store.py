"""The public port for store adapters: request/answer types and the shared lifecycle rules.

An adapter imports only this module (and its own driver). The outbox rules (watches,
notices, their leases) are here too, see ``rill_executor._notices`` for what they mean; and
the event log's (``appended_event``, see ``rill_executor._events``).
"""

from ._decisions import (
    ClaimAction,
    WriteRejection,
    check_write,
    claimed_row,
    decide_claim,
    ended_outputs,
    finished_row,
    heartbeat_row,
    registered_row,
    watched_row,
)
from ._errors import SchemaMissing, StoreError, StoreProtocolError, StoreUnavailable
from ._events import MAX_EVENTS, appended_event
from ._notices import (
    NoticeStatus,
    add_watch,
    finish_notices,
    leasable,
    lease_notice,
    notice_due,
    replay_notice,
    settle_notice,
)
from ._records import AttemptOutcome, AttemptRow, JobRow, JobState
from ._resolution import (
    ResolveAction,
    ResolveRefusal,
    check_resolve,
    resolution_event,
    resolved_attempt,
    resolved_row,
)
from ._store import (
    AsyncStore,
    AttemptRef,
    ClaimRequest,
    Completion,
    LeasedNotice,
    NoticeBatch,
    NoticeSettlement,
    Resolution,
    Store,
    StoreAnswer,
    StoreStatus,
)

__all__ = [
    "MAX_EVENTS",
    "AsyncStore",
    "AttemptOutcome",
    "AttemptRef",
    "AttemptRow",
    "ClaimAction",
    "ClaimRequest",
    "Completion",
    "JobRow",
    "JobState",
    "LeasedNotice",
    "NoticeBatch",
    "NoticeSettlement",
    "NoticeStatus",
    "Resolution",
    "ResolveAction",
    "ResolveRefusal",
    "SchemaMissing",
    "Store",
    "StoreAnswer",
    "StoreError",
    "StoreProtocolError",
    "StoreStatus",
    "StoreUnavailable",
    "WriteRejection",
    "add_watch",
    "appended_event",
    "check_resolve",
    "check_write",
    "claimed_row",
    "decide_claim",
    "ended_outputs",
    "finish_notices",
    "finished_row",
    "heartbeat_row",
    "lease_notice",
    "leasable",
    "notice_due",
    "registered_row",
    "replay_notice",
    "resolution_event",
    "resolved_attempt",
    "resolved_row",
    "settle_notice",
    "watched_row",
]
