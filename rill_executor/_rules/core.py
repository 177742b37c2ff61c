"""The ledger's decisions, shared by ``Ledger`` and ``AsyncLedger``; no I/O here.

It validates what callers pass, builds the store requests, and turns store answers into
claim outcomes, written rows or ``StaleAttempt``. The twins only await or call the store.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from pydantic import TypeAdapter

from .. import _telemetry as telemetry
from .._clock import SYSTEM_CLOCK, Clock
from .._codec import encode_error, encode_result
from .._config import LedgerConfig, Seconds, to_us
from .._errors import InvalidPayload, ResultTooLarge, StaleAttempt, StoreProtocolError, UsageError
from .._keys import (
    fingerprint_of,
    job_id,
    new_attempt_id,
    validate_attempt_id,
    validate_fingerprint,
    validate_key,
    validate_result_version,
    validate_traceparent,
)
from .._outcomes import Conflict, InProgress, Replay
from .._records import ErrorInfo, JobRow, JobState, JobStatus, NoticeInfo, at_us
from .._store import (
    AttemptRef,
    ClaimRequest,
    Completion,
    NoticeBatch,
    NoticeSettlement,
    StoreAnswer,
    StoreStatus,
)
from .._text import (
    escape_text,
    load_json,
    printable_json,
    read_json,
    store_json,
)
from .decisions import (
    ClaimAction,
    WriteRejection,
    already_finished,
    check_write,
    decide_claim,
    owned_by,
)
from .notices import DueNotice, NoticeStatus, Watch, encode_json

__all__ = ["LedgerCore"]

_NO_FINGERPRINT = fingerprint_of(None)


def _origin(origin: Any) -> str:
    """An attempt's origin as stored: JSON whose every string is printable."""
    text = encode_json(origin, "origin")
    printable_json(json.loads(text), "a string of the origin", InvalidPayload)
    return store_json(text)


Outcome = JobRow | Replay | InProgress | Conflict


class LedgerCore:
    """Requests out, outcomes in: what the ledger decides around each store call."""

    def __init__(
        self, config: LedgerConfig, store_kind: str = "store", clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.config = config
        self.store_kind = store_kind  # for telemetry: postgresql, redis…, never an address
        self.clock = clock  # the only clock the ledger's decisions read (``_clock``)

    @property
    def namespace(self) -> str:
        return self.config.namespace

    def job_id(self, key: object) -> str:
        return job_id(self.namespace, validate_key(key))

    def claim_request(
        self,
        key: object,
        *,
        fingerprint: str | None,
        result_version: str | None,
        attempt_id: str | None = None,
        lease: Seconds | None = None,
        origin: Any = None,
        watch: Watch | None = None,
        trace: str | None = None,
    ) -> ClaimRequest:
        text = validate_key(key)
        return ClaimRequest(
            job_id=job_id(self.namespace, text),
            namespace=self.namespace,
            key=text,
            fingerprint=_NO_FINGERPRINT
            if fingerprint is None
            else validate_fingerprint(fingerprint),
            result_version=validate_result_version(result_version),
            attempt_id=new_attempt_id() if attempt_id is None else validate_attempt_id(attempt_id),
            lease_us=self.config.lease_of(lease),
            origin=None if origin is None else _origin(origin),
            watch=None if watch is None else store_json(watch.encode()),
            trace=None if trace is None else validate_traceparent(trace),
        )

    def claim_outcome(
        self, request: ClaimRequest, answer: StoreAnswer, *, resent: bool = False
    ) -> Outcome:
        """The claimed row, or the value that answers the caller instead.

        ``resent``: the library sent this very request again after losing the reply to the
        first send; if that send was applied, the job is found owned by this attempt.
        """
        job = answer.job
        if resent and not answer.ok and owned_by(job, request, answer.now):
            return job  # type: ignore[return-value]  # owned_by checked it
        if answer.ok and job is not None:
            if job.owner_attempt != request.attempt_id or job.state is not JobState.PROCESSING:
                raise StoreProtocolError(f"store claimed but returned another owner: {job!r}")
            return job
        action = decide_claim(job, request, answer.now)
        if job is None or action in (ClaimAction.INSERT, ClaimAction.TAKEOVER):
            raise StoreProtocolError(
                f"store refused a claim it should have granted ({action.value}): {job!r}"
            )
        if action is ClaimAction.CONFLICT:
            return Conflict(
                namespace=job.namespace,
                key=job.key,
                stored_fingerprint=job.fingerprint,
                requested_fingerprint=request.fingerprint,
                stored_result_version=job.result_version,
                requested_result_version=request.result_version,
            )
        if action is ClaimAction.REPLAY:
            return Replay(
                namespace=job.namespace,
                key=job.key,
                fence=job.fence,
                result_version=job.result_version,
                succeeded=job.state is JobState.SUCCEEDED,
                result_json=None if job.result is None else read_json(job.result),
                error=ErrorInfo.from_json(job.error),
                finished_at=at_us(job.finished_at or job.updated_at),
                attempt_id=job.owner_attempt,
                trace=job.trace,
            )
        return InProgress(
            namespace=job.namespace,
            key=job.key,
            owner_attempt_id=job.owner_attempt or "",
            fence=job.fence,
            since=at_us(job.claimed_at or job.updated_at),
            lease_left=timedelta(microseconds=(job.lease_until or answer.now) - answer.now),
            trace=job.trace,
        )

    def written(
        self,
        ref: AttemptRef,
        answer: StoreAnswer,
        *,
        key: str,
        operation: str,
        completion: Completion | None = None,
    ) -> JobRow:
        """The row a fenced write produced, or ``StaleAttempt`` saying why nothing was written.

        A finish whose ``completion`` the store's answer shows already applied by this very
        attempt and fence (its first send's reply was lost) counts as written.
        """
        if answer.ok and answer.job is not None:
            return answer.job
        job = answer.job
        if completion is not None and already_finished(job, ref, completion):
            return job  # type: ignore[return-value]  # already_finished checked it
        reason = check_write(job, ref, answer.now) or WriteRejection.SUPERSEDED
        explain = {
            WriteRejection.MISSING: "the job no longer exists (collected after retention)",
            WriteRejection.SUPERSEDED: (
                f"attempt {job.owner_attempt if job else None} (fence {job.fence if job else '?'})"
                " has claimed the job since"
            ),
            WriteRejection.FINISHED: "this attempt already ended the job",
            WriteRejection.LEASE_EXPIRED: (
                "its lease expired on the store's clock; the next claim takes the job over."
                " Heartbeat more often or use a longer lease"
            ),
        }[reason]
        raise StaleAttempt(
            f"{operation} by attempt {ref.attempt_id} (fence {ref.fence}) of key {key!r}"
            f" rejected, nothing written: {explain}",
            namespace=self.namespace,
            key=key,
            attempt_id=ref.attempt_id,
            fence=ref.fence,
            reason=reason.value,
            current_fence=job.fence if job else None,
            current_owner=job.owner_attempt if job else None,
        )

    def success(
        self,
        value: Any,
        adapter: TypeAdapter[Any] | None = None,
        outputs: str = "[]",
        *,
        source: str = "the handler",
        expected: str = "its return annotation",
    ) -> Completion:
        try:
            result = encode_result(
                value, self.config.max_result_bytes, adapter, source=source, expected=expected
            )
        except ResultTooLarge:
            telemetry.too_large(self.namespace)
            raise
        return Completion(
            state=JobState.SUCCEEDED,
            result=store_json(result),
            error=None,
            retryable=None,
            retention_us=self.config.retention_us,
            outputs=outputs,
        )

    def failure(self, error: BaseException | str, *, retryable: bool) -> Completion:
        return Completion(
            state=JobState.FAILED,
            result=None,
            error=store_json(encode_error(error, retryable=retryable)),
            retryable=retryable,
            retention_us=self.config.retention_us,
        )

    @staticmethod
    def due_notices(batch: NoticeBatch, owner: str) -> list[DueNotice]:
        due = []
        for leased in batch.notices:
            (info,) = NoticeInfo.many(f"[{leased.notice}]")
            text = leased.result if info.state is JobState.SUCCEEDED else None
            result = None if text is None else load_json(text)
            due.append(DueNotice(leased.job_id, leased.namespace, leased.key, owner, info, result))
        return due

    @staticmethod
    def settlement(
        notice: DueNotice,
        status: str,
        outcome: str,
        detail: str | None,
        retry_in: Seconds,
        tried: bool = True,
    ) -> NoticeSettlement:
        if status not in (NoticeStatus.DELIVERED, NoticeStatus.DROPPED, NoticeStatus.PENDING):
            raise UsageError(f"notice status must be delivered, dropped or pending, not {status!r}")
        if not tried and status != NoticeStatus.PENDING:
            raise UsageError(
                f"a notice given back unsent (tried=False) stays pending, not {status!r}"
            )
        return NoticeSettlement(
            notice_id=notice.info.id,
            owner=notice.owner,
            status=status,
            outcome=escape_text(outcome),
            detail=None if detail is None else escape_text(detail),
            retry_in_us=to_us(retry_in, "retry_in", zero=True),
            tried=tried,
        )

    @staticmethod
    def status(answer: StoreStatus | None) -> JobStatus | None:
        if answer is None:
            return None
        return JobStatus.build(answer.job, answer.attempts, answer.now, answer.events)
