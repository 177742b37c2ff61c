"""A clock that moves only when told: the ledger and the in-memory store on simulated time."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import threading
import weakref
from collections.abc import Callable

__all__ = ["VirtualClock"]

_EPOCH_NS = 1_767_225_600 * 10**9  # 2026-01-01T00:00:00Z: any fixed instant keeps runs alike


class VirtualClock:
    """A ``Clock`` (``rill_executor.store.Clock``) whose time passes by ``advance`` or by a
    ``sleep`` of the ledger using it, never by itself: a wait of minutes costs nothing, and
    the same steps give the same times. Pass one to ``Ledger(clock=…)`` and
    ``MemoryStore(clock=…)``.

    A ledger's heartbeats wait on it too (``wait``, ``loop_call_at``): an ``advance`` wakes the
    heartbeat thread and fires the event loops' timers whose time it reaches, so a test renews
    leases by moving the clock, without waiting a lease's worth of real time.
    """

    def __init__(self, start_ns: int = _EPOCH_NS) -> None:
        self._lock = threading.Lock()
        self._wall_ns = start_ns
        self._mono_ns = 0
        # Threads waiting on it, each until a time (None: until notified by others); weak, so
        # a ledger that goes away takes its heartbeat thread's condition with it.
        self._waiting: weakref.WeakKeyDictionary[threading.Condition, int | None] = (
            weakref.WeakKeyDictionary()
        )
        # Event loops' timers (when, order, loop, callback); weak to the loop, which may close.
        self._timers: list[
            tuple[int, int, weakref.ref[asyncio.AbstractEventLoop], Callable[[], object]]
        ] = []
        self._order = itertools.count()

    def monotonic_ns(self) -> int:
        return self._mono_ns

    def time_ns(self) -> int:
        return self._wall_ns

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass (at least 0), waking what waits for a time it reaches."""
        if seconds < 0:
            raise ValueError(f"time does not go back: advance({seconds!r})")
        step = round(seconds * 1e9)
        with self._lock:
            self._wall_ns += step
            self._mono_ns += step
            reached = [
                c
                for c, until in self._waiting.items()
                if until is not None and until <= self._mono_ns
            ]
            for condition in reached:
                del self._waiting[condition]
            due = []
            while self._timers and self._timers[0][0] <= self._mono_ns:
                due.append(heapq.heappop(self._timers))
        for condition in reached:  # outside our lock: a waiter holds its own while it looks
            with condition:
                condition.notify_all()
        for _, _, loop_ref, callback in due:
            loop = loop_ref()
            if loop is not None and not loop.is_closed():
                loop.call_soon_threadsafe(callback)

    def sleep(self, seconds: float) -> None:
        self.advance(max(seconds, 0.0))

    async def asleep(self, seconds: float) -> None:
        self.advance(max(seconds, 0.0))
        await asyncio.sleep(0)  # still a point where other tasks run

    def wait(self, condition: threading.Condition, until_ns: int | None) -> None:
        with self._lock:  # registered before the time is read: no advance goes unseen
            if until_ns is not None and self._mono_ns >= until_ns:
                return
            self._waiting[condition] = until_ns
        # Until an advance reaches until_ns, or the waiter's own code notifies it: an advance
        # wakes no other waiter, so a wake-up the waiter's code forgets stays missing.
        condition.wait()

    def loop_call_at(
        self, loop: asyncio.AbstractEventLoop, when_ns: int, callback: Callable[[], object]
    ) -> None:
        with self._lock:
            if when_ns > self._mono_ns:
                heapq.heappush(
                    self._timers, (when_ns, next(self._order), weakref.ref(loop), callback)
                )
                return
        loop.call_soon_threadsafe(callback)

    def __repr__(self) -> str:
        return f"VirtualClock(at {self._mono_ns / 1e9:.6f} s)"
