"""Automatic heartbeats for long handlers: one scheduler thread per ledger; for asyncio,
one timer per event loop and a task for each claim that lives until its first renewal.

Renews each claim every ``interval`` seconds. A ``StaleAttempt`` ends the renewals and marks
the claim ``lost`` (the handler sees it through ``claim.lost`` / ``claim.ensure_owned()``);
a store outage is retried at the next tick, since the lease may still be live.

Both read and wait on the ledger's clock (``Clock``): on a test's ``VirtualClock`` a renewal
falls due when the test advances the clock past it, not after real time.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import threading
import weakref

from ._claim import AsyncClaim, Claim
from ._clock import Clock
from ._errors import StaleAttempt, StoreError

__all__ = ["AsyncHeartbeats", "Heartbeats", "settled"]

log = logging.getLogger("rill_executor")


class _Watch:
    """One claim the scheduler renews, from ``Heartbeats.start`` to ``Heartbeats.stop``."""

    __slots__ = ("claim", "due", "interval")

    def __init__(self, claim: Claim, interval: int, due: int) -> None:
        self.claim = claim
        self.interval = interval  # nanoseconds
        self.due = due  # when its next renewal is due (the clock's monotonic_ns)


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

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()  # taken directly on the callers' path: no Python frame
        self._wake = threading.Condition(self._lock)  # the thread: something is due sooner
        self._renewed = threading.Condition(self._lock)  # a stopping call: renewal is over
        self._running: set[_Watch] = set()
        self._thread: threading.Thread | None = None
        self._sleeps_until: float = -math.inf  # when the thread wakes by itself; -inf: awake
        self._renewing: _Watch | None = None  # the watch whose renewal is in flight
        self._pace: int | None = None  # the shortest interval started: the thread's idle wait
        self._used = False  # a call started since the thread last went to sleep
        self._closed = False  # the ledger is closed: the thread ends, none starts again

    def start(self, claim: Claim, interval: float) -> _Watch:
        """Renew ``claim`` every ``interval`` seconds until ``stop``."""
        step = _ns(interval)
        watch = _Watch(claim, step, self._clock.monotonic_ns() + step)
        with self._lock:
            self._running.add(watch)
            self._used = True
            self._pace = step if self._pace is None else min(self._pace, step)
            if self._thread is None and not self._closed:
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

    def close(self) -> None:
        """End the thread (its ledger is closed; a ledger's store cannot renew after), so
        closing a ledger leaves no thread behind."""
        with self._lock:
            self._closed = True
            thread, self._thread = self._thread, None
            self._wake.notify()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _next(self) -> _Watch | None:
        """The running watch due first, once it is due, marked as being renewed; None once
        closed."""
        with self._wake:
            while not self._closed:
                first = min(self._running, key=_due, default=None)
                now = self._clock.monotonic_ns()
                if first is not None and first.due <= now:
                    self._sleeps_until = -math.inf  # awake: it looks again before sleeping
                    self._renewing = first
                    return first
                until: int | None = None  # None: until a call wakes it
                if first is not None:
                    until = first.due
                elif self._used and self._pace is not None:
                    until = now + self._pace
                self._used = False
                self._sleeps_until = math.inf if until is None else until
                self._clock.wait(self._wake, until)
            return None

    def _run(self) -> None:
        while (watch := self._next()) is not None:
            again = False
            try:
                again = _renew(watch.claim)
            finally:
                with self._lock:
                    self._renewing = None
                    self._renewed.notify_all()
                    if watch in self._running:  # not stopped meanwhile
                        if again:
                            watch.due = self._clock.monotonic_ns() + watch.interval
                        else:
                            self._running.discard(watch)


def _due(watch: _Watch | _AsyncWatch) -> int:
    return watch.due


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)


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
    """One async claim: in its loop's timetable until its first renewal is due, then
    renewed by a task."""

    __slots__ = ("claim", "due", "interval", "task", "timetable")

    def __init__(self, claim: AsyncClaim, interval: int, due: int, timetable: _Timetable) -> None:
        self.claim = claim
        self.interval = interval  # nanoseconds
        self.due = due  # its first renewal (the clock's monotonic_ns)
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
            await self.timetable.until(self.timetable.clock.monotonic_ns() + self.interval)


# A first renewal may start up to this share of its interval early, so that one firing of
# the timer starts every renewal due about then: a stream of long calls costs a firing (a
# pass over the waiting claims) per tenth of an interval, not one per call.
_EARLY = 0.1


class _Timetable:
    """The watches of one event loop whose first renewal is not yet due, behind a timer
    armed for the earliest: a set, so a call that ends first removes its entry at once.

    It holds only a weak reference to its loop, and none to a timer (whose handle holds the
    loop): a closed loop must be free to go.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, clock: Clock) -> None:
        self.loop = weakref.ref(loop)
        self.clock = clock
        self.waiting: set[_AsyncWatch] = set()
        self.timer_at: float = math.inf  # when the earliest timer armed fires

    def add(self, watch: _AsyncWatch, loop: asyncio.AbstractEventLoop) -> None:
        self.waiting.add(watch)
        if watch.due < self.timer_at:  # a later timer may stay armed: it finds nothing due
            self.timer_at = watch.due
            self.clock.loop_call_at(loop, watch.due, self._fire)

    async def until(self, when_ns: int) -> None:
        """Wait until the clock reaches ``when_ns`` (a renewal task's pause)."""
        loop = asyncio.get_running_loop()
        reached = loop.create_future()
        self.clock.loop_call_at(loop, when_ns, functools.partial(_resolve, reached))
        await reached

    def _fire(self) -> None:
        loop = asyncio.get_running_loop()
        now = self.clock.monotonic_ns()
        if self.timer_at <= now:
            self.timer_at = math.inf
        for watch in [w for w in self.waiting if w.due - w.interval * _EARLY <= now]:
            self.waiting.discard(watch)
            name = f"rill-heartbeat-{watch.claim.attempt_id}"
            watch.task = loop.create_task(watch.renew(), name=name)
        first = min(self.waiting, key=_due, default=None)
        if first is not None and first.due < self.timer_at:
            self.timer_at = first.due
            self.clock.loop_call_at(loop, first.due, self._fire)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():  # not cancelled meanwhile (a renewal task stopped)
        future.set_result(None)


class AsyncHeartbeats:
    """The async twin of ``Heartbeats``: one timer per event loop for the first renewals of
    all of a ledger's running handlers, then a task per claim that lives that long. A
    handler that ends before its first renewal costs a set entry, not a timer or a task.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._timetables: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Timetable] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()  # one ledger may serve event loops in several threads
        self._last: _Timetable | None = None  # the last loop's, found without a lookup

    def start(self, claim: AsyncClaim, interval: float) -> _AsyncWatch:
        loop = asyncio.get_running_loop()
        timetable = self._last
        if timetable is None or timetable.loop() is not loop:
            with self._lock:
                timetable = self._timetables.get(loop)
                if timetable is None:
                    timetable = self._timetables[loop] = _Timetable(loop, self._clock)
            self._last = timetable
        step = _ns(interval)
        watch = _AsyncWatch(claim, step, self._clock.monotonic_ns() + step, timetable)
        timetable.add(watch, loop)
        return watch

    def stop(self, watch: _AsyncWatch) -> asyncio.Task[None] | None:
        """End ``watch``'s renewals; the renewal task to wait out, if one was started."""
        watch.timetable.waiting.discard(watch)
        if watch.task is not None:
            watch.task.cancel()
        return watch.task


async def settled(renewal: asyncio.Task[None]) -> None:
    """Wait out a cancelled renewal, so no heartbeat is in flight after the handler."""
    with contextlib.suppress(asyncio.CancelledError):
        await renewal
