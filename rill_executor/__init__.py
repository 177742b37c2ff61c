"""rill-executor: business idempotency for workflow executors.

Claim a business key atomically, fence every write of the attempt that owns it, commit
exactly one result, and answer what happened to any key. See the README and ``docs/``.
"""

from ._claim import AsyncClaim, Claim
from ._claim_outputs import AsyncClaimOutputs, ClaimOutputs
from ._drill import DrillFinding, DrillReport
from ._duplicate_window import DuplicateWindow, RetryPolicy
from ._errors import (
    ChecksumMismatch,
    ConfigError,
    HandedOff,
    InvalidKey,
    InvalidOutputName,
    InvalidPayload,
    InvalidResult,
    JobFailed,
    JobInProgress,
    KeyConflict,
    OutcomeError,
    OutputAccessDenied,
    OutputExists,
    OutputMissing,
    OutputPreconditionFailed,
    OutputStoreError,
    ResolutionRefused,
    ResultNotSerializable,
    ResultTooLarge,
    RillExecutorError,
    SchemaMissing,
    StaleAttempt,
    StoreError,
    StoreProtocolError,
    StoreUnavailable,
    TerminalError,
    UndecodableResult,
    UsageError,
)
from ._housekeeping import AuditEntry, CollectReport, ObjectState, OutputAudit
from ._idempotent import current_async_claim, current_claim
from ._keys import MAX_KEY_BYTES, fingerprint_of
from ._ledger import AsyncClaimOutcome, AsyncLedger, ClaimOutcome, Ledger
from ._listing import JobList, JobSummary
from ._memory import AsyncMemoryStore, MemoryStore
from ._memory_outputs import MemoryOutputStore
from ._notices import DueNotice, Watch
from ._outcomes import Conflict, InProgress, Replay, raise_for_outcome
from ._outputs import OutputStore, StoredObject
from ._purge import PurgeReport
from ._records import (
    AttemptInfo,
    AttemptOutcome,
    ErrorInfo,
    EventInfo,
    JobState,
    JobStatus,
    NoticeInfo,
    OutputInfo,
    OutputRef,
    OwnerInfo,
)
from ._registry import open_async_store, open_output_store, open_store
from ._store import AsyncStore, Store
from ._threaded_store import ThreadedAsyncStore
from ._version import __version__ as __version__

__all__ = [
    "MemoryOutputStore",
    "open_output_store",
    "StoredObject",
    "OutputStoreError",
    "OutputStore",
    "OutputRef",
    "OutputPreconditionFailed",
    "OutputMissing",
    "OutputInfo",
    "OutputExists",
    "OutputAudit",
    "OutputAccessDenied",
    "ObjectState",
    "InvalidOutputName",
    "CollectReport",
    "ClaimOutputs",
    "ChecksumMismatch",
    "AuditEntry",
    "AsyncClaimOutputs",
    "MAX_KEY_BYTES",
    "AsyncClaim",
    "AsyncClaimOutcome",
    "AsyncLedger",
    "AsyncMemoryStore",
    "AsyncStore",
    "AttemptInfo",
    "AttemptOutcome",
    "Claim",
    "ClaimOutcome",
    "ConfigError",
    "Conflict",
    "DrillFinding",
    "DrillReport",
    "DueNotice",
    "DuplicateWindow",
    "ErrorInfo",
    "EventInfo",
    "HandedOff",
    "InProgress",
    "InvalidKey",
    "InvalidPayload",
    "InvalidResult",
    "JobFailed",
    "JobInProgress",
    "JobList",
    "JobState",
    "JobStatus",
    "JobSummary",
    "KeyConflict",
    "Ledger",
    "MemoryStore",
    "NoticeInfo",
    "OutcomeError",
    "OwnerInfo",
    "PurgeReport",
    "Replay",
    "ResolutionRefused",
    "RetryPolicy",
    "ResultNotSerializable",
    "ResultTooLarge",
    "RillExecutorError",
    "SchemaMissing",
    "StaleAttempt",
    "Store",
    "StoreError",
    "StoreProtocolError",
    "StoreUnavailable",
    "TerminalError",
    "ThreadedAsyncStore",
    "UndecodableResult",
    "UsageError",
    "Watch",
    "current_async_claim",
    "current_claim",
    "fingerprint_of",
    "open_async_store",
    "open_store",
    "raise_for_outcome",
]
