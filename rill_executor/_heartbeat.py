"""Automatic heartbeats for long handlers, in a thread or an asyncio task.

Renews the claim every ``interval`` seconds. A ``StaleAttempt`` ends the renewals and marks
the claim ``lost`` (the handler sees it through ``claim.lost`` / ``claim.ensure_owned()``);
a store outage is retried at the next tick, since the lease may still be live.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from types import TracebackType

from ._claim import AsyncClaim, Claim
from ._errors import StaleAttempt, StoreError

__all__ = ["AsyncHeartbeat", "Heartbeat"]

log = logging.getLogger("rill_executor")


class Heartbeat:
    def __init__(self, claim: Claim, interval: float) -> None:
        self._claim = claim
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"rill-heartbeat-{claim.attempt_id}", daemon=True
        )

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._claim.heartbeat()
            except StaleAttempt as exc:
                log.warning("heartbeat stopped: %s", exc)
                return
            except StoreError as exc:
                log.warning("heartbeat failed, retrying next tick: %s", exc)


class AsyncHeartbeat:
    def __init__(self, claim: AsyncClaim, interval: float) -> None:
        self._claim = claim
        self._interval = interval
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> AsyncHeartbeat:
        self._task = asyncio.create_task(
            self._run(), name=f"rill-heartbeat-{self._claim.attempt_id}"
        )
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self._claim.heartbeat()
            except StaleAttempt as exc:
                log.warning("heartbeat stopped: %s", exc)
                return
            except StoreError as exc:
                log.warning("heartbeat failed, retrying next tick: %s", exc)
