"""Automatic heartbeats for long handlers: one scheduler thread per ledger, or a task.

Renews each claim every ``interval`` seconds. A ``StaleAttempt`` ends the renewals and marks
the claim ``lost`` (the handler sees it through ``claim.lost`` / ``claim.ensure_owned()``);
a store outage is retried at the next tick, since the lease may still be live.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import math
import threading
import time
from types import TracebackType

from ._claim import AsyncClaim, Claim
from ._errors import StaleAttempt, StoreError

__all__ = ["AsyncHeartbeat", "Heartbeats"]

log = logging.getLogger("rill_executor")


class _Watch:
    """One claim the scheduler renews, while the block it guards runs; leaving the block
    waits out a renewal in flight."""

    __slots__ = ("busy", "claim", "heartbeats", "interval", "stopped")

    def __init__(self, heartbeats: Heartbeats, claim: Claim, interval: float) -> None:
        self.heartbeats = heartbeats
        self.claim = claim
        self.interval = interval
        self.stopped = False
        self.busy = threading.Lock()

    def __enter__(self) -> None:
        self.heartbeats._schedule(self, started=True)

    def __exit__(self, t: object, e: object, tb: object) -> None:
        with self.busy:
            self.stopped = True
        self.heartbeats._stopped()


class Heartbeats:
    """One thread per ledger that renews the leases of all its running handlers.

    Handlers register a claim with ``watch`` (a context manager); no thread is started per
    call. Renewals run one after another, each well inside its claim's lease.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()  # taken directly on the callers' path: no Python frame
        self._wake = threading.Condition(self._lock)
        self._due: list[tuple[float, int, _Watch]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None
        self._running = 0  # watches not stopped yet; the rest of ``_due`` waits to be dropped
        self._sleeps_until = -math.inf  # when the thread wakes by itself; -inf: it is awake

    def watch(self, claim: Claim, interval: float) -> _Watch:
        return _Watch(self, claim, interval)

    def _schedule(self, watch: _Watch, *, started: bool = False) -> None:
        entry = (time.monotonic() + watch.interval, next(self._order), watch)
        with self._lock:
            self._running += started
            heapq.heappush(self._due, entry)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="rill-heartbeats", daemon=True
                )
                self._thread.start()
            elif entry[0] < self._sleeps_until:
                # Due before the time the thread sleeps towards. Otherwise it is not woken:
                # most handlers end long before their first renewal, and a wake-up (a
                # thread switch) per call would cost more than the handler's claim.
                self._wake.notify()

    def _stopped(self) -> None:
        with self._lock:
            self._running -= 1
            # A stopped watch stays queued until its renewal falls due. Under many short
            # calls that is a lease/3's worth of them: drop them once they are most of
            # the queue, so a push stays cheap and ended claims are not kept alive.
            if len(self._due) > 64 and len(self._due) > 2 * self._running:
                self._due = [entry for entry in self._due if not entry[2].stopped]
                heapq.heapify(self._due)

    def _next(self) -> _Watch:
        with self._wake:
            while not self._due or self._due[0][0] > time.monotonic():
                self._sleeps_until = self._due[0][0] if self._due else math.inf
                self._wake.wait(self._sleeps_until - time.monotonic() if self._due else None)
            self._sleeps_until = -math.inf  # awake: it looks at the queue before sleeping
            return heapq.heappop(self._due)[2]

    def _run(self) -> None:
        while True:
            watch = self._next()
            with watch.busy:
                if watch.stopped:
                    continue
                try:
                    watch.claim.heartbeat()
                except StaleAttempt as exc:
                    log.warning("heartbeat stopped: %s", exc)
                    continue
                except StoreError as exc:
                    log.warning("heartbeat failed, retrying next tick: %s", exc)
            self._schedule(watch)


class AsyncHeartbeat:
    """Renews one claim from a task of its own, started only when the first renewal is
    due: a handler that ends before then costs a timer, not a task."""

    def __init__(self, claim: AsyncClaim, interval: float) -> None:
        self._claim = claim
        self._interval = interval
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> AsyncHeartbeat:
        self._timer = asyncio.get_running_loop().call_later(self._interval, self._start)
        return self

    def _start(self) -> None:
        self._task = asyncio.create_task(
            self._run(), name=f"rill-heartbeat-{self._claim.attempt_id}"
        )

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._timer is not None
        self._timer.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            try:
                await self._claim.heartbeat()
            except StaleAttempt as exc:
                log.warning("heartbeat stopped: %s", exc)
                return
            except StoreError as exc:
                log.warning("heartbeat failed, retrying next tick: %s", exc)
            await asyncio.sleep(self._interval)
