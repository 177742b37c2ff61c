"""The curated public names are a contract: adding or removing one is a decision."""

import rill_executor
import rill_executor.integration
import rill_executor.limits
import rill_executor.outputs
import rill_executor.reports
import rill_executor.store
import rill_executor.testing


def test_public_names_are_pinned() -> None:
    """The top level holds what a user of the decorator, the explicit claim, the errors and
    the Rill Flow executor needs; the rest lives in a module named for it."""
    assert sorted(rill_executor.__all__) == [
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
        "InProgress",
        "IncompatibleStore",
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
        "MAX_KEY_BYTES",
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
    assert sorted(rill_executor.outputs.__all__) == [
        "AsyncClaimOutputs",
        "ChecksumMismatch",
        "ClaimOutputs",
        "MemoryOutputStore",
        "OutputAccessDenied",
        "OutputData",
        "OutputExists",
        "OutputMissing",
        "OutputPreconditionFailed",
        "OutputRef",
        "OutputStore",
        "OutputStoreError",
        "StoredObject",
        "open_output_store",
    ]
    assert sorted(rill_executor.integration.__all__) == [
        "Completion",
        "IdempotentOptions",
        "IdempotentSpec",
        "RunSpan",
        "Scope",
        "Seconds",
        "adapter_for",
        "check_lease",
        "encode_result",
        "meter",
        "printable",
        "to_us",
        "tracer",
    ]
    assert sorted(rill_executor.limits.__all__) == [
        "MAX_ACTOR_CHARS",
        "MAX_ATTEMPT_ID_CHARS",
        "MAX_DETAIL_CHARS",
        "MAX_ERROR_CHARS",
        "MAX_EVENTS",
        "MAX_HANDLER_NAME_CHARS",
        "MAX_KEY_BYTES",
        "MAX_OBJECT_KEY_BYTES",
        "MAX_OUTPUT_NAME_CHARS",
        "MAX_PAGE",
        "MAX_PURGE_BATCH",
        "MAX_REASON_CHARS",
        "MAX_VERSION_CHARS",
        "MAX_WATCH_ID_CHARS",
    ]
    assert sorted(rill_executor.reports.__all__) == [
        "AttemptInfo",
        "AuditEntry",
        "CollectReport",
        "DrillFinding",
        "DrillReport",
        "ErrorInfo",
        "EventInfo",
        "JobList",
        "JobSummary",
        "NO_RESULT",
        "NoticeInfo",
        "ObjectState",
        "OutputAudit",
        "OutputInfo",
        "OwnerInfo",
        "PurgeReport",
        "TOKEN_REFUSED",
        "default_actor",
        "is_resolution",
    ]
    modules = (
        rill_executor,
        rill_executor.integration,
        rill_executor.limits,
        rill_executor.outputs,
        rill_executor.reports,
        rill_executor.store,
        rill_executor.testing,
    )
    for module in modules:
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name} is listed but missing"


def test_the_names_that_left_the_top_level_live_in_their_modules() -> None:
    for name in ("MemoryStore", "AsyncMemoryStore", "Store", "ThreadedAsyncStore", "Watch"):
        assert name in rill_executor.store.__all__ and not hasattr(rill_executor, name)
    for name in ("OutputRef", "ClaimOutputs", "MemoryOutputStore", "open_output_store"):
        assert name in rill_executor.outputs.__all__ and not hasattr(rill_executor, name)
    for name in ("DrillReport", "AuditEntry", "PurgeReport", "JobSummary", "AttemptInfo"):
        assert name in rill_executor.reports.__all__ and not hasattr(rill_executor, name)


def test_errors_form_one_hierarchy() -> None:
    from rill_executor import (
        ConfigError,
        InvalidKey,
        JobInProgress,
        KeyConflict,
        OutcomeError,
        OutcomeUnknown,
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
    assert issubclass(OutcomeUnknown, StoreUnavailable)
    for root in (UsageError, OutcomeError, StoreError):
        assert issubclass(root, RillExecutorError)
