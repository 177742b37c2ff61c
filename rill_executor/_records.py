"""Job and attempt records: the rows stores keep, and the public views built from them.

Stores speak in ``JobRow`` / ``AttemptRow``: plain dataclasses whose times are integer
microseconds since the epoch *on the store's clock*. The ledger turns them into the public,
pydantic ``JobStatus`` / ``AttemptInfo`` views with datetimes and timedeltas.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict

from ._rules.events import split_log
from ._text import load_json

__all__ = [
    "AttemptInfo",
    "AttemptOutcome",
    "AttemptRow",
    "ErrorInfo",
    "EventInfo",
    "JobRow",
    "JobState",
    "JobStatus",
    "NoticeInfo",
    "OutputInfo",
    "OutputRef",
    "OwnerInfo",
    "at_us",
    "from_us",
]


MAX_ERROR_CHARS = 4000


class JobState(enum.StrEnum):
    PROCESSING = "processing"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class AttemptOutcome(enum.StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    EXPIRED = "expired"  # its lease ran out and another attempt took the job over
    FENCED = "fenced"  # superseded while its lease was live (operator resolution)
    ABANDONED = "abandoned"  # ended without a word; reserved for resolutions and GC


@dataclass(frozen=True, slots=True)
class JobRow:
    job_id: str
    namespace: str
    key: str
    state: JobState
    fence: int
    owner_attempt: str | None
    claimed_at: int | None  # when the current owner claimed
    lease_until: int | None
    fingerprint: str
    result_version: str | None
    result: str | None  # JSON text of the committed result
    error: str | None  # JSON text of ErrorInfo
    retryable: bool | None
    created_at: int
    updated_at: int
    finished_at: int | None
    retain_until: int | None
    outputs: str = "[]"  # JSON: the outputs the current owner registered (name, key, uri)
    origin: str | None = None  # JSON: what the current owner answers (e.g. an engine dispatch)
    watchers: str = "{}"  # JSON: watch id -> target, dispatches waiting for the job's end
    notices: str = "[]"  # JSON: the outbox, completion notices and their delivery
    trace: str | None = None  # W3C traceparent of the current owner's span, if traced


@dataclass(frozen=True, slots=True)
class AttemptRow:
    fence: int
    attempt_id: str
    started_at: int
    ended_at: int | None
    outcome: AttemptOutcome
    error: str | None
    outputs: str = "[]"  # JSON: its outputs, each with "committed": true/false
    origin: str | None = None  # JSON: what it answered (e.g. an engine dispatch)
    trace: str | None = None  # W3C traceparent of its span, if traced


def from_us(us: int | None) -> datetime | None:
    if us is None:
        return None
    return datetime.fromtimestamp(us / 1_000_000, tz=UTC)


def at_us(us: int) -> datetime:
    return datetime.fromtimestamp(us / 1_000_000, tz=UTC)


class _View(BaseModel):
    model_config = ConfigDict(frozen=True)


class ErrorInfo(_View):
    type: str
    message: str
    retryable: bool

    @classmethod
    def of(cls, error: BaseException | str, *, retryable: bool) -> ErrorInfo:
        if isinstance(error, BaseException):
            kind, message = type(error).__qualname__, str(error)
        else:
            kind, message = "Error", error
        if len(message) > MAX_ERROR_CHARS:
            message = message[:MAX_ERROR_CHARS] + "… (truncated)"
        return cls(type=kind, message=message, retryable=retryable)

    @classmethod
    def from_json(cls, text: str | None) -> ErrorInfo | None:
        return None if text is None else cls.model_validate(load_json(text))


class OwnerInfo(_View):
    attempt_id: str
    fence: int
    since: datetime
    lease_expires_at: datetime
    lease_left: timedelta  # negative once expired, on the store's clock

    @classmethod
    def of(cls, job: JobRow, now: int) -> OwnerInfo | None:
        """The owner of a ``processing`` job, with its lease on the store's clock ``now``."""
        if job.state is not JobState.PROCESSING or not job.owner_attempt or not job.lease_until:
            return None
        return cls(
            attempt_id=job.owner_attempt,
            fence=job.fence,
            since=at_us(job.claimed_at or job.updated_at),
            lease_expires_at=at_us(job.lease_until),
            lease_left=timedelta(microseconds=job.lease_until - now),
        )


class OutputRef(_View):
    """An object an attempt wrote through ``claim.outputs.put``: what a result refers to."""

    name: str
    key: str  # the object's key in the output store (attempt-scoped)
    uri: str
    sha256: str
    size: int
    etag: str | None = None
    version_id: str | None = None


class OutputInfo(_View):
    """An output an attempt registered; ``committed`` once its result was committed with it.

    Registered before it was written: an output that was never uploaded (the attempt died
    in between) has no ``sha256`` or ``size``.
    """

    name: str
    key: str
    uri: str
    committed: bool = False
    sha256: str | None = None
    size: int | None = None
    etag: str | None = None
    version_id: str | None = None

    @classmethod
    def many(cls, text: str | None, *, committed: bool | None = None) -> tuple[OutputInfo, ...]:
        infos = tuple(cls.model_validate(item) for item in load_json(text or "[]"))
        if committed is None:
            return infos
        return tuple(info.model_copy(update={"committed": committed}) for info in infos)


class EventInfo(_View):
    """An entry of the job's event log: something that happened outside the attempts' own
    writes, e.g. a completion token refused (``kind`` ``token_refused``) with its ``reason``,
    or an operator's resolution (``resolved``: ``detail`` the action, ``actor``, ``reason``,
    ``fence`` the fence it set, ``data`` whether it was forced and the state before)."""

    at: datetime  # on the store's clock
    kind: str
    attempt_id: str | None = None  # the attempt it concerns, if any
    fence: int | None = None
    reason: str | None = None
    detail: str | None = None
    actor: str | None = None  # who decided it, for a manual resolution
    data: dict[str, Any] | None = None  # e.g. a resolution's state before

    @classmethod
    def log(cls, text: str | None) -> tuple[tuple[EventInfo, ...], int]:
        """The entries of an event log and how many it dropped (``rill_executor._rules.events``)."""
        entries, dropped = split_log(load_json(text or "[]"))
        return tuple(cls.model_validate({**e, "at": at_us(int(e["at"]))}) for e in entries), dropped


class AttemptInfo(_View):
    attempt_id: str
    fence: int
    started_at: datetime
    ended_at: datetime | None
    outcome: AttemptOutcome
    error: ErrorInfo | None
    outputs: tuple[OutputInfo, ...] = ()
    origin: dict[str, Any] | None = None  # what it answered, e.g. a Rill Flow dispatch
    trace: str | None = None  # W3C traceparent of its span, if it ran traced
    events: tuple[EventInfo, ...] = ()  # the job's events that concern this attempt


class NoticeInfo(_View):
    """A completion notice in the job's outbox: whom to tell which outcome, and its delivery."""

    id: str
    watch: str  # the watch it answers (for Rill Flow: execution id and task name)
    target: Any  # where to send it (for Rill Flow: the callback URL)
    fence: int  # the finish whose outcome it reports
    state: JobState  # that outcome
    error: ErrorInfo | None
    status: str  # pending, delivered or dropped
    attempts: int  # deliveries tried
    due: datetime
    outcome: str | None  # how the last delivery was answered
    detail: str | None
    created_at: datetime
    settled_at: datetime | None

    @property
    def unsent(self) -> bool:
        """Pending, and given back unsent by every deliverer that leased it: none of them
        may send it (``detail`` says why); it waits for one that may (invariant 20)."""
        return self.status == "pending" and self.attempts == 0 and self.outcome is not None

    @classmethod
    def many(cls, text: str | None) -> tuple[NoticeInfo, ...]:
        return tuple(
            cls(
                id=n["id"],
                watch=n["watch"],
                target=n["target"],
                fence=n["fence"],
                state=JobState(n["state"]),
                error=None if n["error"] is None else ErrorInfo.model_validate(n["error"]),
                status=n["status"],
                attempts=n["attempts"],
                due=at_us(n["due"]),
                outcome=n["outcome"],
                detail=n["detail"],
                created_at=at_us(n["created_at"]),
                settled_at=from_us(n["settled_at"]),
            )
            for n in load_json(text or "[]")
        )


class JobStatus(_View):
    """Everything recorded about one business key, read in one store round trip."""

    namespace: str
    key: str
    state: JobState
    fence: int
    result_version: str | None
    fingerprint: str
    owner: OwnerInfo | None
    result: Any
    error: ErrorInfo | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    retain_until: datetime | None
    store_time: datetime
    attempts: tuple[AttemptInfo, ...]
    watchers: dict[str, Any] = {}  # dispatches waiting for the end (watch id -> target)
    notices: tuple[NoticeInfo, ...] = ()  # the outbox
    events: tuple[EventInfo, ...] = ()  # the event log, oldest first (the first are kept)
    events_dropped: int = 0  # reported events not kept: the log was full (see record_event)

    @property
    def outputs(self) -> tuple[OutputRef, ...]:
        """The outputs committed with the job's result (empty unless it succeeded)."""
        if self.state is not JobState.SUCCEEDED:
            return ()
        winner = next((a for a in self.attempts if a.fence == self.fence), None)
        return tuple(
            OutputRef.model_validate(info.model_dump(exclude={"committed"}))
            for info in (winner.outputs if winner else ())
            if info.committed and info.sha256 is not None and info.size is not None
        )

    @classmethod
    def build(
        cls, job: JobRow, attempts: list[AttemptRow], now: int, events: str = "[]"
    ) -> JobStatus:
        logged, dropped = EventInfo.log(events)
        return cls(
            namespace=job.namespace,
            key=job.key,
            state=job.state,
            fence=job.fence,
            result_version=job.result_version,
            fingerprint=job.fingerprint,
            owner=OwnerInfo.of(job, now),
            result=None if job.result is None else load_json(job.result),
            error=ErrorInfo.from_json(job.error),
            created_at=at_us(job.created_at),
            updated_at=at_us(job.updated_at),
            finished_at=from_us(job.finished_at),
            retain_until=from_us(job.retain_until),
            store_time=at_us(now),
            attempts=tuple(
                AttemptInfo(
                    attempt_id=a.attempt_id,
                    fence=a.fence,
                    started_at=at_us(a.started_at),
                    ended_at=from_us(a.ended_at),
                    outcome=_settled(a, job),
                    error=ErrorInfo.from_json(a.error),
                    outputs=_outputs_of(a, job),
                    origin=None if a.origin is None else load_json(a.origin),
                    trace=a.trace,
                    events=tuple(e for e in logged if _concerns(e, a)),
                )
                for a in sorted(attempts, key=lambda a: a.fence)
            ),
            watchers=load_json(job.watchers or "{}"),
            notices=NoticeInfo.many(job.notices),
            events=logged,
            events_dropped=dropped,
        )


def _concerns(event: EventInfo, attempt: AttemptRow) -> bool:
    """Whether ``event`` names ``attempt``, or is the resolution that ended it (fenced or
    abandoned): its ``before`` names the attempt as the owner then."""
    if event.attempt_id == attempt.attempt_id and event.fence == attempt.fence:
        return True
    before = (event.data or {}).get("before") or {}
    return (before.get("owner_attempt"), before.get("fence")) == (
        attempt.attempt_id,
        attempt.fence,
    )


def _outputs_of(attempt: AttemptRow, job: JobRow) -> tuple[OutputInfo, ...]:
    if attempt.outcome is AttemptOutcome.RUNNING and attempt.fence == job.fence:
        return OutputInfo.many(job.outputs, committed=False)  # the owner's, so far
    return OutputInfo.many(attempt.outputs)


def _settled(attempt: AttemptRow, job: JobRow) -> AttemptOutcome:
    # A superseded attempt still marked running lost its lease to a takeover whose
    # bookkeeping raced with it; it can never write again, so it is expired.
    if attempt.outcome is AttemptOutcome.RUNNING and attempt.fence != job.fence:
        return AttemptOutcome.EXPIRED
    return attempt.outcome
