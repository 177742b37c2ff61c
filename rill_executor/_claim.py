"""A claim you own: ``Claim`` and its asyncio twin ``AsyncClaim``.

Every method is one fenced store round trip. Once any of them raises ``StaleAttempt`` (or the
automatic heartbeat meets one), ``lost`` turns true and the attempt must stop writing.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pydantic import TypeAdapter

from ._claim_outputs import AsyncClaimOutputs, ClaimOutputs
from ._core import LedgerCore, Seconds
from ._errors import StaleAttempt
from ._outputs import OutputStore
from ._records import JobRow, at_us
from ._store import AsyncStore, AttemptRef, Completion, Store, StoreAnswer

__all__ = ["AsyncClaim", "Claim"]


class _ClaimBase:
    def __init__(self, core: LedgerCore, row: JobRow) -> None:
        assert row.owner_attempt is not None
        self._core = core
        self._ref = AttemptRef(row.job_id, row.owner_attempt, row.fence)
        self._lost = False  # set by whichever thread learns the attempt was fenced
        self.namespace = row.namespace
        self.key = row.key
        self.lease_expires_at: datetime = at_us(row.lease_until or 0)
        self.lease = timedelta(microseconds=(row.lease_until or 0) - (row.claimed_at or 0))

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

    def _accept(self, answer: StoreAnswer, operation: str) -> JobRow:
        try:
            row = self._core.written(self._ref, answer, key=self.key, operation=operation)
        except StaleAttempt:
            self._lost = True
            raise
        if row.lease_until is not None:
            self.lease_expires_at = at_us(row.lease_until)
        return row

    def _lease_us(self, lease: Seconds | None) -> int:
        return (
            self._core.lease_us(lease)
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
        self.outputs = ClaimOutputs(self, outputs)
        """Write output objects under this claim: ``claim.outputs.put(name, data)``."""

    def heartbeat(self, lease: Seconds | None = None) -> datetime:
        """Extend the lease to now + ``lease`` (default: the claim's lease), store clock."""
        answer = self._store.heartbeat(self._ref, self._lease_us(lease))
        self._accept(answer, "heartbeat")
        return self.lease_expires_at

    def commit(self, result: Any, *, adapter: TypeAdapter[Any] | None = None) -> None:
        """Make ``result`` (with every output put through this claim) the job's one result."""
        self._finish(self._core.success(result, adapter, self.outputs.committed()), "commit")

    def _register_output(self, intent: str) -> None:
        self._accept(self._store.register_output(self._ref, intent), "output registration")

    def fail(self, error: BaseException | str, *, retryable: bool) -> None:
        """End the attempt as failed: retryable lets the next claim run the job again."""
        self._finish(self._core.failure(error, retryable=retryable), "fail")

    def _finish(self, completion: Completion, operation: str) -> None:
        self._accept(self._store.finish(self._ref, completion), operation)


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
        self.outputs = AsyncClaimOutputs(self, outputs)

    async def heartbeat(self, lease: Seconds | None = None) -> datetime:
        answer = await self._store.heartbeat(self._ref, self._lease_us(lease))
        self._accept(answer, "heartbeat")
        return self.lease_expires_at

    async def commit(self, result: Any, *, adapter: TypeAdapter[Any] | None = None) -> None:
        await self._finish(self._core.success(result, adapter, self.outputs.committed()), "commit")

    async def _register_output(self, intent: str) -> None:
        answer = await self._store.register_output(self._ref, intent)
        self._accept(answer, "output registration")

    async def fail(self, error: BaseException | str, *, retryable: bool) -> None:
        await self._finish(self._core.failure(error, retryable=retryable), "fail")

    async def _finish(self, completion: Completion, operation: str) -> None:
        self._accept(await self._store.finish(self._ref, completion), operation)
