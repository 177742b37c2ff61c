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

    __slots__ = ("claim", "due", "interval")

    def __init__(self, claim: Claim, interval: float, due: float) -> None:
        self.claim = claim
        self.interval = interval
        self.due = due  # when its next renewal is due (time.monotonic)


class Heartbeats:
    """One thread per ledger that renews the leases of all its running handlers.

    A handler's claim is renewed from ``start`` to ``stop``; no thread is started per call.
    Renewals run one after another, each well inside its claim's lease. One lock guards the
    running watches and which one is being renewed: a call takes it once to start (a set
    insert) and once to stop (a removal), so an ended call leaves nothing behind. The
    thread sleeps until the earliest renewal due; with none running, one interval (a call
    started meanwhile is due no sooner, so it need not wake the thread), or for good once
    an interval has passed without a call.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()  # taken directly on the callers' path: no Python frame
        self._wake = threading.Condition(self._lock)  # the thread: something is due sooner
        self._renewed = threading.Condition(self._lock)  # a stopping call: renewal is over
        self._running: set[_Watch] = set()
        self._thread: threading.Thread | None = None
        self._sleeps_until = -math.inf  # when the thread wakes by itself; -inf: it is awake
        self._renewing: _Watch | None = None  # the watch whose renewal is in flight
        self._pace = math.inf  # the shortest interval started: the thread's idle wait
        self._used = False  # a call started since the thread last went to sleep

    def start(self, claim: Claim, interval: float) -> _Watch:
        """Renew ``claim`` every ``interval`` seconds until ``stop``."""
        watch = _Watch(claim, interval, time.monotonic() + interval)
        with self._lock:
            self._running.add(watch)
            self._used = True
            self._pace = min(self._pace, interval)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="rill-heartbeats", daemon=True
                )
                self._thread.start()
            elif watch.due < self._sleeps_until:
                # Due before the time the thread sleeps towards. Otherwise it is not woken:
                # most handlers end long before their first renewal, and a wake-up (a
                # thread switch) per call would cost more than the handler's claim.
                self._wake.notify()
        return watch

    def stop(self, watch: _Watch) -> None:
        """End ``watch``'s renewals; a renewal of it in flight is waited out."""
        with self._lock:
            self._running.discard(watch)  # under this lock: never renewed after
            while self._renewing is watch:
                self._renewed.wait()

    def _next(self) -> _Watch:
        """The running watch due first, once it is due, marked as being renewed."""
        with self._wake:
            while True:
                first = min(self._running, key=_due, default=None)
                now = time.monotonic()
                if first is not None and first.due <= now:
                    self._sleeps_until = -math.inf  # awake: it looks again before sleeping
                    self._renewing = first
                    return first
                if first is not None:
                    until = first.due
                else:
                    until = now + self._pace if self._used else math.inf
                self._used = False
                self._sleeps_until = until
                self._wake.wait(None if until == math.inf else until - now)

    def _run(self) -> None:
        while True:
            watch = self._next()
            again = False
            try:
                again = _renew(watch.claim)
            finally:
                with self._lock:
                    self._renewing = None
                    self._renewed.notify_all()
                    if watch in self._running:  # not stopped meanwhile
                        if again:
                            watch.due = time.monotonic() + watch.interval
                        else:
                            self._running.discard(watch)


def _due(watch: _Watch) -> float:
    return watch.due


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
