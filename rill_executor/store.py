"""The public port for store adapters: request/answer types and the shared lifecycle rules.

An adapter imports only this module (and its own driver).
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
)
from ._errors import SchemaMissing, StoreError, StoreProtocolError, StoreUnavailable
from ._records import AttemptOutcome, AttemptRow, JobRow, JobState
from ._store import (
    AsyncStore,
    AttemptRef,
    ClaimRequest,
    Completion,
    Store,
    StoreAnswer,
    StoreStatus,
)

__all__ = [
    "AsyncStore",
    "AttemptOutcome",
    "AttemptRef",
    "AttemptRow",
    "ClaimAction",
    "ClaimRequest",
    "Completion",
    "JobRow",
    "JobState",
    "SchemaMissing",
    "Store",
    "StoreAnswer",
    "StoreError",
    "StoreProtocolError",
    "StoreStatus",
    "StoreUnavailable",
    "WriteRejection",
    "check_write",
    "claimed_row",
    "decide_claim",
    "ended_outputs",
    "finished_row",
    "heartbeat_row",
    "registered_row",
]
