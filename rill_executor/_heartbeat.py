"""Automatic heartbeats for long handlers: one scheduler thread per ledger; for asyncio,
one timer per event loop and a task for each claim that lives until its first renewal.

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
import weakref

from ._claim import AsyncClaim, Claim
from ._errors import StaleAttempt, StoreError

__all__ = ["AsyncHeartbeats", "Heartbeats", "settled"]

log = logging.getLogger("rill_executor")


class _Watch:
    """One claim the scheduler renews, from ``Heartbeats.start`` to ``Heartbeats.stop``."""

    __slots__ = ("claim", "interval", "stopped")

    def __init__(self, claim: Claim, interval: float) -> None:
        self.claim = claim
        self.interval = interval
        self.stopped = False


class Heartbeats:
    """One thread per ledger that renews the leases of all its running handlers.

    A handler's claim is renewed from ``start`` to ``stop``; no thread is started per call.
    Renewals run one after another, each well inside its claim's lease. One lock guards
    the schedule and which watch is being renewed, so a call takes it once to start and
    once to stop, and allocates no lock of its own.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()  # taken directly on the callers' path: no Python frame
        self._wake = threading.Condition(self._lock)  # the thread: something is due sooner
        self._renewed = threading.Condition(self._lock)  # a stopping call: renewal is over
        self._due: list[tuple[float, int, _Watch]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None
        self._running = 0  # watches not stopped yet; the rest of ``_due`` waits to be dropped
        self._sleeps_until = -math.inf  # when the thread wakes by itself; -inf: it is awake
        self._renewing: _Watch | None = None  # the watch whose renewal is in flight

    def start(self, claim: Claim, interval: float) -> _Watch:
        """Renew ``claim`` every ``interval`` seconds until ``stop``."""
        watch = _Watch(claim, interval)
        self._schedule(watch, started=True)
        return watch

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

    def stop(self, watch: _Watch) -> None:
        """End ``watch``'s renewals; a renewal of it in flight is waited out."""
        with self._lock:
            watch.stopped = True  # seen by the thread under this lock: never renewed after
            self._running -= 1
            while self._renewing is watch:
                self._renewed.wait()
            # A stopped watch stays queued until its renewal falls due. Under many short
            # calls that is a lease/3's worth of them: drop them once they are most of
            # the queue, so a push stays cheap and ended claims are not kept alive.
            if len(self._due) > 64 and len(self._due) > 2 * self._running:
                self._due = [entry for entry in self._due if not entry[2].stopped]
                heapq.heapify(self._due)

    def _next(self) -> _Watch:
        """The next watch due that is still running, marked as being renewed."""
        with self._wake:
            while True:
                while not self._due or self._due[0][0] > time.monotonic():
                    self._sleeps_until = self._due[0][0] if self._due else math.inf
                    self._wake.wait(self._sleeps_until - time.monotonic() if self._due else None)
                self._sleeps_until = -math.inf  # awake: it looks at the queue before sleeping
                watch = heapq.heappop(self._due)[2]
                if not watch.stopped:
                    self._renewing = watch
                    return watch

    def _run(self) -> None:
        while True:
            watch = self._next()
            try:
                again = _renew(watch.claim)
            finally:
                with self._lock:
                    self._renewing = None
                    self._renewed.notify_all()
            if again:
                self._schedule(watch)


def _renew(claim: Claim) -> bool:
    """Renew ``claim``'s lease once; False when it is no longer the owner's to renew."""
    try:
        claim.heartbeat()
    except StaleAttempt as exc:
        log.warning("heartbeat stopped: %s", exc)
        return False
    except StoreError as exc:
        log.warning("heartbeat failed, retrying next tick: %s", exc)
    return True


class _AsyncWatch:
    """One async claim: queued until its first renewal is due, then renewed by a task."""

    __slots__ = ("claim", "interval", "stopped", "task", "timetable")

    def __init__(self, claim: AsyncClaim, interval: float, timetable: _Timetable) -> None:
        self.claim = claim
        self.interval = interval
        self.stopped = False
        self.task: asyncio.Task[None] | None = None
        self.timetable = timetable  # its event loop's, found once

    async def renew(self) -> None:
        while True:
            try:
                await self.claim.heartbeat()
            except StaleAttempt as exc:
                log.warning("heartbeat stopped: %s", exc)
                return
            except StoreError as exc:
                log.warning("heartbeat failed, retrying next tick: %s", exc)
            await asyncio.sleep(self.interval)


class _Timetable:
    """The first renewals due on one event loop, behind a timer armed for the earliest.

    It holds no reference to its loop, nor to a timer (whose handle does): it is kept per
    loop in a weak mapping, and a closed loop must be free to go.
    """

    def __init__(self) -> None:
        self.due: list[tuple[float, int, _AsyncWatch]] = []
        self.order = itertools.count()
        self.timer_at = math.inf  # when the earliest timer armed fires
        self.running = 0

    def add(self, watch: _AsyncWatch, loop: asyncio.AbstractEventLoop) -> None:
        at = loop.time() + watch.interval
        heapq.heappush(self.due, (at, next(self.order), watch))
        self.running += 1
        if at < self.timer_at:  # a later timer may stay armed: its firing finds nothing due
            self.timer_at = at
            loop.call_at(at, self._fire)

    def remove(self, watch: _AsyncWatch) -> None:
        watch.stopped = True
        self.running -= 1
        if len(self.due) > 64 and len(self.due) > 2 * self.running:  # see Heartbeats._stopped
            self.due = [entry for entry in self.due if not entry[2].stopped]
            heapq.heapify(self.due)

    def _fire(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self.timer_at <= now:
            self.timer_at = math.inf
        while self.due and self.due[0][0] <= now:
            watch = heapq.heappop(self.due)[2]
            if not watch.stopped:
                name = f"rill-heartbeat-{watch.claim.attempt_id}"
                watch.task = loop.create_task(watch.renew(), name=name)
        if self.due and self.due[0][0] < self.timer_at:
            self.timer_at = self.due[0][0]
            loop.call_at(self.timer_at, self._fire)


class AsyncHeartbeats:
    """The async twin of ``Heartbeats``: one timer per event loop for the first renewals of
    all of a ledger's running handlers, then a task per claim that lives that long. A
    handler that ends before its first renewal costs a queue entry, not a timer or a task.
    """

    def __init__(self) -> None:
        self._timetables: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Timetable] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()  # one ledger may serve event loops in several threads

    def start(self, claim: AsyncClaim, interval: float) -> _AsyncWatch:
        loop = asyncio.get_running_loop()
        timetable = self._timetables.get(loop)
        if timetable is None:
            with self._lock:
                timetable = self._timetables.setdefault(loop, _Timetable())
        watch = _AsyncWatch(claim, interval, timetable)
        timetable.add(watch, loop)
        return watch

    def stop(self, watch: _AsyncWatch) -> asyncio.Task[None] | None:
        """End ``watch``'s renewals; the renewal task to wait out, if one was started."""
        watch.timetable.remove(watch)
        if watch.task is not None:
            watch.task.cancel()
        return watch.task


async def settled(renewal: asyncio.Task[None]) -> None:
    """Wait out a cancelled renewal, so no heartbeat is in flight after the handler."""
    with contextlib.suppress(asyncio.CancelledError):
        await renewal
