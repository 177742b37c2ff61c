"""rill-executor: business idempotency for workflow executors.

Claim a business key atomically, fence every write of the attempt that owns it, commit
exactly one result, and answer what happened to any key. See the README and ``docs/``.
"""

from ._claim import AsyncClaim, Claim, current_async_claim, current_claim
from ._duplicate_window import DuplicateWindow, RetryPolicy
from ._errors import (
    ChecksumMismatch,
    ConfigError,
    HandedOff,
    IncompatibleStore,
    InvalidKey,
    InvalidOutputName,
    InvalidPayload,
    InvalidResult,
    JobFailed,
    JobInProgress,
    KeyConflict,
    OutcomeError,
    OutcomeUnknown,
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
from ._keys import MAX_KEY_BYTES, fingerprint_of
from ._ledger import AsyncClaimOutcome, AsyncLedger, ClaimOutcome, Ledger
from ._outcomes import Conflict, InProgress, Replay, raise_for_outcome
from ._records import AttemptOutcome, JobState, JobStatus
from ._registry import open_async_store, open_store
from ._version import __version__ as __version__

# What a user of the decorator, the explicit claim, the errors and the Rill Flow executor
# needs. Store ports and implementations are in ``rill_executor.store``, output objects in
# ``rill_executor.outputs``, the parts of a status and the reports of audit, purge and
# orphan collection in ``rill_executor.reports``.
__all__ = [
    "MAX_KEY_BYTES",
    "AsyncClaim",
    "AsyncClaimOutcome",
    "AsyncLedger",
    "AttemptOutcome",
    "ChecksumMismatch",
    "Claim",
    "ClaimOutcome",
    "ConfigError",
    "Conflict",
    "DuplicateWindow",
    "HandedOff",
    "IncompatibleStore",
    "InProgress",
    "InvalidKey",
    "InvalidOutputName",
    "InvalidPayload",
    "InvalidResult",
    "JobFailed",
    "JobInProgress",
    "JobState",
    "JobStatus",
    "KeyConflict",
    "Ledger",
    "OutcomeError",
    "OutcomeUnknown",
    "OutputAccessDenied",
    "OutputExists",
    "OutputMissing",
    "OutputPreconditionFailed",
    "OutputStoreError",
    "Replay",
    "ResolutionRefused",
    "ResultNotSerializable",
    "ResultTooLarge",
    "RetryPolicy",
    "RillExecutorError",
    "SchemaMissing",
    "StaleAttempt",
    "StoreError",
    "StoreProtocolError",
    "StoreUnavailable",
    "TerminalError",
    "UndecodableResult",
    "UsageError",
    "current_async_claim",
    "current_claim",
    "fingerprint_of",
    "open_async_store",
    "open_store",
    "raise_for_outcome",
]
