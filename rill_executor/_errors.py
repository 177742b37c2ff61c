"""The one error hierarchy of rill-executor.

    RillExecutorError
    ├── UsageError                   the caller asked for something invalid; nothing was written
    │   ├── ConfigError              a Ledger or store was configured unsafely or wrongly
    │   │   └── UnsafeDeployment     durability=require, and the store can lose commits
    │   ├── InvalidKey               a business key or namespace is empty, too long, not UTF-8
    │   ├── InvalidPayload           a fingerprint or attempt id that cannot be used
    │   ├── InvalidOutputName        an output name that cannot become an object key
    │   ├── InvalidResult            a result that does not validate as the handler's return type
    │   ├── ResultNotSerializable    a result pydantic cannot turn into JSON
    │   └── ResultTooLarge           a serialised result over the ledger's (or the store's) limit
    ├── OutcomeError                 the job's recorded state answers the call
    │   ├── JobInProgress            another attempt holds a live lease
    │   ├── KeyConflict              same key, different fingerprint or result version
    │   ├── JobFailed                a replayed terminal failure
    │   ├── UndecodableResult        a stored result that no longer validates as the asked type
    │   ├── StaleAttempt             a write from an attempt that no longer owns the job
    │   └── ResolutionRefused        an operator's resolution not applied; nothing written
    └── StoreError                   the store itself failed; state is as the store left it
        ├── StoreUnavailable         could not reach the store, or it dropped the call
        │   └── OutcomeUnknown       a write sent twice whose outcome is unknown: read it back
        ├── SchemaMissing            the store's schema is absent or older than this library
        ├── IncompatibleStore        the store admits only newer versions of the library
        ├── StoreProtocolError       the store answered something the protocol forbids
        └── OutputStoreError         the output store (e.g. S3) failed or refused
            ├── OutputMissing        no object under that key / bucket missing
            ├── OutputAccessDenied   the credentials may not do that
            ├── OutputExists         a conditional write found the key taken
            ├── OutputPreconditionFailed  a conditional write found another version
            └── ChecksumMismatch     the object's bytes are not the ones recorded

    TerminalError                    raised by handlers (not by the library): do not retry
    HandedOff                        raised by handlers: the work continues elsewhere, end nothing

Messages say what happened and what to do. Inside the library a conflict or an in-progress
answer is a value (see ``rill_executor.ClaimOutcome``); only the decorator and the explicit
``raise_for_outcome`` turn them into these exceptions.
"""

from __future__ import annotations

from datetime import datetime, timedelta

__all__ = [
    "ChecksumMismatch",
    "ConfigError",
    "HandedOff",
    "IncompatibleStore",
    "InvalidKey",
    "InvalidOutputName",
    "InvalidPayload",
    "InvalidResult",
    "JobFailed",
    "JobInProgress",
    "KeyConflict",
    "OutcomeError",
    "OutcomeUnknown",
    "OutputAccessDenied",
    "OutputExists",
    "OutputMissing",
    "OutputPreconditionFailed",
    "OutputStoreError",
    "ResolutionRefused",
    "ResultNotSerializable",
    "ResultTooLarge",
    "RillExecutorError",
    "SchemaMissing",
    "StaleAttempt",
    "StoreError",
    "StoreProtocolError",
    "StoreUnavailable",
    "TerminalError",
    "UndecodableResult",
    "UnsafeDeployment",
    "UsageError",
    "DurabilityWarning",
]


class RillExecutorError(Exception):
    """Root of every error this library raises on purpose."""


class UsageError(RillExecutorError, ValueError):
    """The call itself was invalid. No stored record was touched."""


class ConfigError(UsageError):
    """A configuration that would be unsafe or cannot work."""


class UnsafeDeployment(ConfigError):
    """``durability=require``, and the store's settings can lose acknowledged claims or
    commits (Redis eviction or no AOF, PostgreSQL ``synchronous_commit=off``…): refused at
    open, and claims refused while a check finds it so."""


class DurabilityWarning(RuntimeWarning):
    """The store's settings can lose acknowledged claims or commits: work may run twice."""


class InvalidKey(UsageError):
    """A namespace or business key that cannot be stored."""


class InvalidPayload(UsageError):
    """A fingerprint, result version or attempt id that cannot be stored."""


class InvalidOutputName(UsageError):
    """An output name with '/', '..', control characters, or over the length limit."""


class InvalidResult(UsageError):
    """A result that does not validate as the handler's return annotation, or would not
    decode as it after being stored (e.g. NaN, which JSON stores as null)."""


class ResultNotSerializable(UsageError):
    """The handler's result cannot be serialised to JSON by pydantic."""


class ResultTooLarge(UsageError):
    """The serialised result is larger than the ledger accepts."""

    def __init__(self, message: str, *, size: int, limit: int) -> None:
        super().__init__(message)
        self.size = size
        self.limit = limit


class OutcomeError(RillExecutorError):
    """The job's recorded state is the answer; the handler did not run."""

    def __init__(self, message: str, *, namespace: str, key: str) -> None:
        super().__init__(message)
        self.namespace = namespace
        self.key = key


class JobInProgress(OutcomeError):
    """Another attempt owns the job and its lease is live."""

    def __init__(
        self,
        message: str,
        *,
        namespace: str,
        key: str,
        owner_attempt_id: str,
        fence: int,
        since: datetime,
        lease_left: timedelta,
    ) -> None:
        super().__init__(message, namespace=namespace, key=key)
        self.owner_attempt_id = owner_attempt_id
        self.fence = fence
        self.since = since
        self.lease_left = lease_left


class KeyConflict(OutcomeError):
    """The key was already used for different work (fingerprint or result version)."""

    def __init__(
        self,
        message: str,
        *,
        namespace: str,
        key: str,
        stored_fingerprint: str,
        requested_fingerprint: str,
        stored_result_version: str | None,
        requested_result_version: str | None,
    ) -> None:
        super().__init__(message, namespace=namespace, key=key)
        self.stored_fingerprint = stored_fingerprint
        self.requested_fingerprint = requested_fingerprint
        self.stored_result_version = stored_result_version
        self.requested_result_version = requested_result_version


class JobFailed(OutcomeError):
    """The job ended in a terminal failure; that failure is replayed, not re-run."""

    def __init__(
        self,
        message: str,
        *,
        namespace: str,
        key: str,
        error_type: str,
        error_message: str,
    ) -> None:
        super().__init__(message, namespace=namespace, key=key)
        self.error_type = error_type
        self.error_message = error_message


class UndecodableResult(OutcomeError):
    """The committed result no longer validates as the type asked for: the handler's return
    type changed for a key that already has a result. Bump ``result_version`` for the new
    type, or resolve the key so that it runs again."""

    def __init__(self, message: str, *, namespace: str, key: str, type_name: str) -> None:
        super().__init__(message, namespace=namespace, key=key)
        self.type_name = type_name


class StaleAttempt(OutcomeError):
    """A write (heartbeat, commit, fail) from an attempt that is not the current owner.

    Nothing was written. ``reason`` is one of ``superseded`` (another attempt claimed the
    job since), ``lease_expired`` (the lease ran out on the store's clock), ``finished``
    (this attempt already committed or failed) or ``missing`` (no such job).
    """

    def __init__(
        self,
        message: str,
        *,
        namespace: str,
        key: str,
        attempt_id: str,
        fence: int,
        reason: str,
        current_fence: int | None,
        current_owner: str | None,
    ) -> None:
        super().__init__(message, namespace=namespace, key=key)
        self.attempt_id = attempt_id
        self.fence = fence
        self.reason = reason
        self.current_fence = current_fence
        self.current_owner = current_owner


class ResolutionRefused(OutcomeError):
    """A manual resolution that was not applied; nothing was written. ``reason`` is
    ``missing`` (no such job), ``live_lease`` (an attempt holds a live lease: pass
    ``force=True`` to fence it off) or ``no_result`` (``reuse`` without a committed result:
    give one, or redo or terminate)."""

    def __init__(self, message: str, *, namespace: str, key: str, reason: str) -> None:
        super().__init__(message, namespace=namespace, key=key)
        self.reason = reason


class StoreError(RillExecutorError):
    """The store failed. The job is in whatever state the store last committed."""


class StoreUnavailable(StoreError):
    """The store could not be reached or dropped the call; retrying later is safe.

    ``applied`` is False when the store cannot have applied the call (it was never sent,
    or the server refused it or rolled it back), None when it may have (the call was sent
    and its reply lost): then only reading the record tells."""

    def __init__(self, message: str, *, applied: bool | None = None) -> None:
        super().__init__(message)
        self.applied: bool | None = applied


class OutcomeUnknown(StoreUnavailable):
    """A write (a commit, a failure) was sent, sent again, and neither reply came back:
    it may be recorded or not. Read the job (``ledger.status(key)``, ``rill-executor
    status KEY``) or claim the key again (a replay if it was recorded) to learn which."""


class SchemaMissing(StoreError):
    """The store has no schema, or an older one than this library needs."""


class IncompatibleStore(StoreError):
    """The store records an oldest writer version newer than this library's: a newer
    version upgraded it, and this process could not keep the invariants its records rely
    on. Nothing was written; upgrade the process (see docs/operations.md)."""


class StoreProtocolError(StoreError):
    """The store returned an answer the store contract does not allow."""


class OutputStoreError(StoreError):
    """The output store failed or refused an operation."""


class OutputMissing(OutputStoreError):
    """No object under the key, or the bucket itself does not exist."""


class OutputAccessDenied(OutputStoreError):
    """The output store's credentials do not allow the operation."""


class OutputExists(OutputStoreError):
    """A write that must not replace an object found the key taken."""


class OutputPreconditionFailed(OutputStoreError):
    """A conditional replace found another version than the one expected."""


class ChecksumMismatch(OutputStoreError):
    """An object's bytes do not match the checksum or size recorded for it."""


class TerminalError(Exception):
    """Raise (or subclass) this in a handler to record a failure that must not be re-run.

    The failure is replayed to every duplicate as ``JobFailed`` until the record's retention
    passes. Any other exception is recorded as retryable: the next claim runs the job again.
    """


class HandedOff(Exception):
    """Raise this in a handler that handed its work to an external worker (with a completion
    token): the attempt is neither committed nor failed, its heartbeat stops, and the
    worker's completion, presented with the token, ends it through the fence.
    """
