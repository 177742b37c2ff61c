"""What a claim can answer besides "you own it": replay, in progress, conflict.

Claim outcomes are values meant for ``match``::

    match ledger.claim(key, fingerprint=fp):
        case Claim() as claim: ...        # run the work, then claim.commit(result)
        case Replay() as replay: ...      # replay.result(MyType) or replay.raise_for_failure()
        case InProgress() as busy: ...    # busy.owner_attempt_id, busy.lease_left
        case Conflict() as conflict: ...  # the key was used for other work
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar, overload

from pydantic import ValidationError

from ._codec import adapter_for, type_name
from ._errors import JobFailed, JobInProgress, KeyConflict, UndecodableResult
from ._records import ErrorInfo

__all__ = ["Conflict", "InProgress", "Replay", "raise_for_outcome"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Replay:
    """The job already ended: a committed result, or a terminal failure."""

    namespace: str
    key: str
    fence: int
    result_version: str | None
    succeeded: bool
    result_json: str | None
    error: ErrorInfo | None
    finished_at: datetime
    attempt_id: str | None = None  # the attempt whose outcome this is
    trace: str | None = None  # W3C traceparent of that attempt's span, if it ran traced

    @overload
    def result(self) -> Any: ...
    @overload
    def result(self, type_: type[T]) -> T: ...
    def result(self, type_: Any = Any) -> Any:
        """The stored result validated as ``type_``; raises ``JobFailed`` for a failure and
        ``UndecodableResult`` for a result stored by a handler with another return type."""
        self.raise_for_failure()
        try:
            return adapter_for(type_).validator.validate_json(self.result_json or "null")
        except ValidationError as exc:
            name = type_name(type_)
            raise UndecodableResult(
                f"the result committed for key {self.key!r} in namespace {self.namespace!r}"
                f" (result version {self.result_version!r}) does not validate as {name}:"
                f" {exc.errors(include_url=False)[0]['msg']}. The handler's return type changed"
                " since it was committed: give the new type a new result_version, or resolve"
                " the key so that it runs again",
                namespace=self.namespace,
                key=self.key,
                type_name=name,
            ) from exc

    def raise_for_failure(self) -> None:
        if self.succeeded:
            return
        error = self.error or ErrorInfo(type="Error", message="unknown", retryable=False)
        raise JobFailed(
            f"job {self.key!r} in namespace {self.namespace!r} failed terminally"
            f" ({error.type}: {error.message}); the failure is replayed, not re-run. An"
            " operator resolution or a new result version runs it again",
            namespace=self.namespace,
            key=self.key,
            error_type=error.type,
            error_message=error.message,
        )


@dataclass(frozen=True, slots=True)
class InProgress:
    """Another attempt owns the job and its lease is live on the store's clock."""

    namespace: str
    key: str
    owner_attempt_id: str
    fence: int
    since: datetime
    lease_left: timedelta
    trace: str | None = None  # W3C traceparent of the owner's span, if it runs traced

    def error(self) -> JobInProgress:
        return JobInProgress(
            f"job {self.key!r} in namespace {self.namespace!r} is being run by attempt"
            f" {self.owner_attempt_id} (fence {self.fence}) since {self.since.isoformat()};"
            f" its lease has {self.lease_left.total_seconds():.3f}s left. Retry later, or"
            " pass wait= to join it",
            namespace=self.namespace,
            key=self.key,
            owner_attempt_id=self.owner_attempt_id,
            fence=self.fence,
            since=self.since,
            lease_left=self.lease_left,
        )


@dataclass(frozen=True, slots=True)
class Conflict:
    """The key is bound to different work: another fingerprint or result version."""

    namespace: str
    key: str
    stored_fingerprint: str
    requested_fingerprint: str
    stored_result_version: str | None
    requested_result_version: str | None

    def error(self) -> KeyConflict:
        if self.stored_result_version != self.requested_result_version:
            what = (
                f"result version {self.stored_result_version!r}, not"
                f" {self.requested_result_version!r}"
            )
        else:
            what = (
                f"a request with fingerprint {self.stored_fingerprint[:12]}…, not"
                f" {self.requested_fingerprint[:12]}…"
            )
        return KeyConflict(
            f"key {self.key!r} in namespace {self.namespace!r} is already bound to {what};"
            " the same key must always mean the same work. Put the differing parameters"
            " (or a new result version) into the key",
            namespace=self.namespace,
            key=self.key,
            stored_fingerprint=self.stored_fingerprint,
            requested_fingerprint=self.requested_fingerprint,
            stored_result_version=self.stored_result_version,
            requested_result_version=self.requested_result_version,
        )


def raise_for_outcome(outcome: object) -> None:
    """Raise the exception an in-progress, conflict or failed-replay outcome stands for."""
    if isinstance(outcome, (InProgress, Conflict)):
        raise outcome.error()
    if isinstance(outcome, Replay):
        outcome.raise_for_failure()
