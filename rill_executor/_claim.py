"""A claim you own: ``Claim`` and its asyncio twin ``AsyncClaim``.

Every method is one fenced store round trip. Once any of them raises ``StaleAttempt`` (or the
automatic heartbeat meets one), ``lost`` turns true and the attempt must stop writing.

A heartbeat or finish whose reply is lost (``StoreUnavailable``: the connection broke after
the call was sent) is sent once more: a heartbeat twice extends the lease twice, and a finish
found already applied by this attempt, at this fence, with the same completion, is taken as
written. If the second send fails too, the error says what is known: ``OutcomeUnknown``
when either send may have been applied (its reply was lost), else ``StoreUnavailable``
saying the outcome is not recorded.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from pydantic import TypeAdapter

from . import _telemetry as telemetry
from ._claim_outputs import AsyncClaimOutputs, ClaimOutputs
from ._config import Seconds
from ._errors import OutcomeUnknown, StaleAttempt, StoreUnavailable, UsageError
from ._outputs import OutputStore
from ._records import JobRow, JobState, at_us
from ._rules.core import LedgerCore
from ._store import AsyncStore, AttemptRef, Completion, Store, StoreAnswer

__all__ = [
    "AsyncClaim",
    "Claim",
    "current",
    "current_async_claim",
    "current_claim",
    "resend_once",
    "resend_once_async",
]


def resend_once(call: Callable[[], StoreAnswer]) -> tuple[StoreAnswer, bool]:
    """``call()``, sent a second time after a ``StoreUnavailable``; and whether it was. If
    the second fails too, its error's ``applied`` covers both sends."""
    try:
        return call(), False
    except StoreUnavailable as first:
        try:
            return call(), True
        except StoreUnavailable as again:
            if first.applied is not False:
                again.applied = None  # the first send may have been applied
            raise


async def resend_once_async(call: Callable[[], Awaitable[StoreAnswer]]) -> tuple[StoreAnswer, bool]:
    try:
        return await call(), False
    except StoreUnavailable as first:
        try:
            return await call(), True
        except StoreUnavailable as again:
            if first.applied is not False:
                again.applied = None  # the first send may have been applied
            raise


class _ClaimBase:
    def __init__(self, core: LedgerCore, row: JobRow) -> None:
        assert row.owner_attempt is not None
        self._core = core
        self._ref = AttemptRef(row.job_id, row.owner_attempt, row.fence)
        self._lost = False  # set by whichever thread learns the attempt was fenced
        self.takeover = row.created_at != row.claimed_at
        """True if this claim took the job over (from a failure, a lapsed lease or an
        expired record) rather than creating it."""
        self.namespace = row.namespace
        self.key = row.key
        self.lease_expires_at: datetime = at_us(row.lease_until or 0)
        self.lease = timedelta(microseconds=(row.lease_until or 0) - (row.claimed_at or 0))
        # When the lease ends on this process's monotonic clock, as last granted (a claim's
        # latency makes it a little late: a fenced write after it is refused anyway).
        self._lease_deadline = self._monotonic() + self.lease.total_seconds()

    def _monotonic(self) -> float:
        return self._core.clock.monotonic_ns() / 1e9

    def lease_left(self) -> float:
        """Seconds until the lease runs out, as last granted, on this process's clock."""
        return self._lease_deadline - self._monotonic()

    @property
    def attempt_id(self) -> str:
        return self._ref.attempt_id

    @property
    def fence(self) -> int:
        return self._ref.fence

    @property
    def job_id(self) -> str:
        return self._ref.job_id

    @property
    def lost(self) -> bool:
        """True once this attempt is known to no longer own the job."""
        return self._lost

    def ensure_owned(self) -> None:
        """Raise ``StaleAttempt`` if this attempt is known to have lost the job."""
        if self.lost:
            raise StaleAttempt(
                f"attempt {self.attempt_id} (fence {self.fence}) of key {self.key!r} no"
                " longer owns the job; stop and write nothing",
                namespace=self.namespace,
                key=self.key,
                attempt_id=self.attempt_id,
                fence=self.fence,
                reason="superseded",
                current_fence=None,
                current_owner=None,
            )

    def commit_of(
        self,
        result: Any,
        *,
        adapter: TypeAdapter[Any] | None = None,
        source: str = "the handler",
        expected: str = "its return annotation",
    ) -> Completion:
        """The commit of ``result`` (with every output put through this claim) as ``finish``
        writes it, checked first: a result that cannot be stored, or does not validate as
        ``adapter``'s type, raises a ``UsageError`` that names ``source`` and ``expected``
        (what produced the result, what it should have been). Writes nothing."""
        return self._core.success(
            result, adapter, self._committed_outputs(), source=source, expected=expected
        )

    def failure_of(self, error: BaseException | str, *, retryable: bool) -> Completion:
        """The failure ``finish`` writes for ``error``; writes nothing."""
        return self._core.failure(error, retryable=retryable)

    def _committed_outputs(self) -> str:
        raise NotImplementedError

    def _unrecorded(self, operation: str, exc: StoreUnavailable) -> StoreUnavailable:
        """The error of a finish sent twice in vain: ``OutcomeUnknown`` if either send may
        have been applied, else the outcome is known not to be recorded."""
        lapse = (
            f"job stays processing until its lease runs out (at"
            f" {self.lease_expires_at.isoformat()} on the store's clock, as last seen); then"
            f" the next claim runs the work again"
        )
        attempt = f"attempt {self.attempt_id} (fence {self.fence}) of key {self.key!r}"
        if exc.applied is False:
            return StoreUnavailable(
                f"{operation} by {attempt} did not reach the store, sent twice: the outcome"
                f" is NOT recorded. The {lapse}. Cause: {exc}",
                applied=False,
            )
        return OutcomeUnknown(
            f"{operation} by {attempt} was sent twice and no reply came back: the outcome is"
            f" UNKNOWN, it may be recorded. Read it: `rill-executor status {self.key}`"
            " (ledger.status(key)), or claim the key again (a replay if it was recorded). If"
            f" it was not, the {lapse}. Cause: {exc}"
        )

    def _accept(
        self, answer: StoreAnswer, operation: str, completion: Completion | None = None
    ) -> JobRow:
        try:
            row = self._core.written(
                self._ref, answer, key=self.key, operation=operation, completion=completion
            )
        except StaleAttempt:
            self._lost = True
            raise
        if row.lease_until is not None:
            self.lease_expires_at = at_us(row.lease_until)
            self._lease_deadline = self._monotonic() + (row.lease_until - answer.now) / 1e6
        return row

    def _lease_us(self, lease: Seconds | None) -> int:
        return (
            self._core.config.lease_of(lease)
            if lease is not None
            else self.lease // timedelta(microseconds=1)
        )

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {self.namespace}/{self.key!r} attempt={self.attempt_id}"
            f" fence={self.fence}>"
        )


class Claim(_ClaimBase):
    def __init__(
        self, core: LedgerCore, store: Store, row: JobRow, outputs: OutputStore | None = None
    ) -> None:
        super().__init__(core, row)
        self._store = store
        self.outputs = ClaimOutputs(self, self._register_output, store.store_id, outputs)
        """Write output objects under this claim: ``claim.outputs.put(name, data)``."""

    def heartbeat(self, lease: Seconds | None = None) -> datetime:
        """Extend the lease to now + ``lease`` (default: the claim's lease), store clock."""
        lease_us = self._lease_us(lease)
        with telemetry.heartbeat(self, self._core.store_kind):
            answer, _ = resend_once(lambda: self._store.heartbeat(self._ref, lease_us))
            self._accept(answer, "heartbeat")
        return self.lease_expires_at

    def commit(self, result: Any, *, adapter: TypeAdapter[Any] | None = None) -> None:
        """Make ``result`` (with every output put through this claim) the job's one result.

        ``adapter`` validates it as the type replays will read (see ``Replay.result``). A
        result that cannot be stored raises a ``UsageError`` and writes nothing: the claim
        is still yours to ``fail`` or commit again."""
        self.finish(self.commit_of(result, adapter=adapter))

    def _committed_outputs(self) -> str:
        return self.outputs.committed()

    def _register_output(self, intent: str) -> None:
        self._accept(self._store.register_output(self._ref, intent), "output registration")

    def fail(self, error: BaseException | str, *, retryable: bool) -> None:
        """End the attempt as failed: retryable lets the next claim run the job again."""
        self.finish(self.failure_of(error, retryable=retryable))

    def finish(self, completion: Completion) -> None:
        """End the attempt with ``completion`` (from ``commit_of`` or ``failure_of``), fenced
        like every write: ``StaleAttempt`` if another attempt owns the job."""
        operation = _operation(completion)
        with telemetry.write_span(self, operation, self._core.store_kind):
            try:
                answer, _ = resend_once(lambda: self._store.finish(self._ref, completion))
            except StoreUnavailable as exc:
                raise self._unrecorded(operation, exc) from exc
            self._accept(answer, operation, completion)


class AsyncClaim(_ClaimBase):
    def __init__(
        self,
        core: LedgerCore,
        store: AsyncStore,
        row: JobRow,
        outputs: OutputStore | None = None,
    ) -> None:
        super().__init__(core, row)
        self._store = store
        self.outputs = AsyncClaimOutputs(self, self._register_output, store.store_id, outputs)

    @classmethod
    def resume(
        cls,
        core: LedgerCore,
        store: AsyncStore,
        *,
        job_id: str,
        key: str,
        attempt_id: str,
        fence: int,
        outputs: OutputStore | None = None,
    ) -> AsyncClaim:
        """The claim of an attempt known by reference only (a completion token's): every
        write is fenced by the store as usual, so a superseded attempt writes nothing. Its
        lease, until the first heartbeat, is the ledger's default."""
        now = 0
        row = JobRow(
            job_id=job_id,
            namespace=core.namespace,
            key=key,
            state=JobState.PROCESSING,
            fence=fence,
            owner_attempt=attempt_id,
            claimed_at=now,
            lease_until=now + core.config.lease_us,
            fingerprint="",
            result_version=None,
            result=None,
            error=None,
            retryable=None,
            created_at=now,
            updated_at=now,
            finished_at=None,
            retain_until=None,
        )
        return cls(core, store, row, outputs)

    async def heartbeat(self, lease: Seconds | None = None) -> datetime:
        lease_us = self._lease_us(lease)
        with telemetry.heartbeat(self, self._core.store_kind):
            answer, _ = await resend_once_async(lambda: self._store.heartbeat(self._ref, lease_us))
            self._accept(answer, "heartbeat")
        return self.lease_expires_at

    async def commit(self, result: Any, *, adapter: TypeAdapter[Any] | None = None) -> None:
        await self.finish(self.commit_of(result, adapter=adapter))

    def _committed_outputs(self) -> str:
        return self.outputs.committed()

    async def _register_output(self, intent: str) -> None:
        answer = await self._store.register_output(self._ref, intent)
        self._accept(answer, "output registration")

    async def fail(self, error: BaseException | str, *, retryable: bool) -> None:
        await self.finish(self.failure_of(error, retryable=retryable))

    async def finish(self, completion: Completion) -> None:
        operation = _operation(completion)
        with telemetry.write_span(self, operation, self._core.store_kind):
            try:
                answer, _ = await resend_once_async(
                    lambda: self._store.finish(self._ref, completion)
                )
            except StoreUnavailable as exc:
                raise self._unrecorded(operation, exc) from exc
            self._accept(answer, operation, completion)


def _operation(completion: Completion) -> str:
    return "commit" if completion.state is JobState.SUCCEEDED else "fail"


# The claim of the handler running in this context; set by the ledger around the handler.
current: contextvars.ContextVar[Claim | AsyncClaim] = contextvars.ContextVar("rill_claim")


def current_claim() -> Claim:
    """The ``Claim`` of the ``idempotent`` handler running in this context."""
    claim = current.get(None)
    if not isinstance(claim, Claim):
        raise UsageError("current_claim() is only available inside a sync idempotent handler")
    return claim


def current_async_claim() -> AsyncClaim:
    """The ``AsyncClaim`` of the ``idempotent`` async handler running in this task."""
    claim = current.get(None)
    if not isinstance(claim, AsyncClaim):
        raise UsageError(
            "current_async_claim() is only available inside an async idempotent handler"
        )
    return claim
