"""The curated public names are a contract: adding or removing one is a decision."""

import rill_executor
import rill_executor.store
import rill_executor.testing


def test_public_names_are_pinned() -> None:
    assert sorted(rill_executor.__all__) == [
        "AsyncClaim",
        "AsyncClaimOutcome",
        "AsyncClaimOutputs",
        "AsyncLedger",
        "AsyncMemoryStore",
        "AsyncStore",
        "AttemptInfo",
        "AttemptOutcome",
        "AuditEntry",
        "ChecksumMismatch",
        "Claim",
        "ClaimOutcome",
        "ClaimOutputs",
        "CollectReport",
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
        "InvalidOutputName",
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
        "MAX_KEY_BYTES",
        "MemoryOutputStore",
        "MemoryStore",
        "NoticeInfo",
        "ObjectState",
        "OutcomeError",
        "OutputAccessDenied",
        "OutputAudit",
        "OutputExists",
        "OutputInfo",
        "OutputMissing",
        "OutputPreconditionFailed",
        "OutputRef",
        "OutputStore",
        "OutputStoreError",
        "OwnerInfo",
        "PurgeReport",
        "Replay",
        "ResolutionRefused",
        "ResultNotSerializable",
        "ResultTooLarge",
        "RetryPolicy",
        "RillExecutorError",
        "SchemaMissing",
        "StaleAttempt",
        "Store",
        "StoreError",
        "StoreProtocolError",
        "StoreUnavailable",
        "StoredObject",
        "TerminalError",
        "ThreadedAsyncStore",
        "UndecodableResult",
        "UsageError",
        "Watch",
        "current_async_claim",
        "current_claim",
        "fingerprint_of",
        "open_async_store",
        "open_output_store",
        "open_store",
        "raise_for_outcome",
    ]
    for module in (rill_executor, rill_executor.store, rill_executor.testing):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name} is listed but missing"


def test_errors_form_one_hierarchy() -> None:
    from rill_executor import (
        ConfigError,
        InvalidKey,
        JobInProgress,
        KeyConflict,
        OutcomeError,
        RillExecutorError,
        StaleAttempt,
        StoreError,
        StoreUnavailable,
        UsageError,
    )

    for usage in (ConfigError, InvalidKey):
        assert issubclass(usage, UsageError) and issubclass(usage, ValueError)
    for outcome in (JobInProgress, KeyConflict, StaleAttempt):
        assert issubclass(outcome, OutcomeError)
    assert issubclass(StoreUnavailable, StoreError)
    for root in (UsageError, OutcomeError, StoreError):
        assert issubclass(root, RillExecutorError)
