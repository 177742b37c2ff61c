"""A clock that moves only when told: the ledger, the in-memory store and the engine simulator
on simulated time."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Schedule", "TimerHandle", "VirtualClock"]

_EPOCH_NS = 1_767_225_600 * 10**9  # 2026-01-01T00:00:00Z: any fixed instant keeps runs alike


@dataclass(eq=False)
class TimerHandle:
    """One callback waiting in a ``Schedule``; ``cancel`` keeps it from ever running."""

    due_ns: int
    callback: Callable[[], None] = field(repr=False)
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


class Schedule:
    """Callbacks keyed by their due time (nanoseconds on one clock's ``monotonic_ns``),
    taken in due order, and those due at the same instant in the order they were added:
    whoever runs them (a thread on the real clock, ``VirtualClock.advance``) runs them alike.
    Not locked: its owner holds its own lock around every call."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, TimerHandle]] = []
        self._order = itertools.count()

    def add(self, due_ns: int, callback: Callable[[], None]) -> TimerHandle:
        handle = TimerHandle(due_ns, callback)
        heapq.heappush(self._heap, (due_ns, next(self._order), handle))
        return handle

    def next_due(self) -> int | None:
        """The earliest due time of a callback not cancelled; ``None`` when none waits."""
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ns: int) -> TimerHandle | None:
        """The earliest callback due at ``now_ns`` or before, taken out; ``None`` if none is."""
        due = self.next_due()
        if due is None or due > now_ns:
            return None
        return heapq.heappop(self._heap)[2]


class VirtualClock:
    """A ``Clock`` (``rill_executor.store.Clock``) whose time passes by ``advance`` or by a
    ``sleep`` of the ledger using it, never by itself: a wait of minutes costs nothing, and
    the same steps give the same times. Pass one to ``Ledger(clock=…)``,
    ``MemoryStore(clock=…)`` and ``EngineSimulator(clock=…)``.

    ``call_at`` and ``call_later`` leave a callback to run when the clock reaches its time:
    ``advance`` (and so a ``sleep`` on this clock) stops at each due time on its way, in due
    order, sets the clock there and runs the callback in the advancing thread, so a callback
    reads the instant it was due and a timer it arms is taken in turn.

    A ledger's heartbeats wait on it too (``wait``, ``loop_call_at``): an ``advance`` wakes
    the heartbeat thread and fires the event loops' timers whose time it reaches, so a test
    renews leases by moving the clock, without waiting a lease's worth of real time.
    """

    def __init__(self, start_ns: int = _EPOCH_NS) -> None:
        self._lock = threading.Lock()
        self._wall_ns = start_ns
        self._mono_ns = 0
        self._schedule = Schedule()

    def monotonic_ns(self) -> int:
        return self._mono_ns

    def time_ns(self) -> int:
        return self._wall_ns

    def call_at(self, when_ns: int, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` once the clock's ``monotonic_ns`` reaches ``when_ns`` (at the
        next ``advance`` if it already has)."""
        with self._lock:
            return self._schedule.add(when_ns, callback)

    def call_later(self, seconds: float, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` once ``seconds`` (at least 0) have passed on this clock."""
        with self._lock:
            due = self._mono_ns + round(max(seconds, 0.0) * 1e9)
            return self._schedule.add(due, callback)

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass (at least 0), running the callbacks due on the way.

        A callback that raises stops the advance there (the clock stays at its due time)."""
        if seconds < 0:
            raise ValueError(f"time does not go back: advance({seconds!r})")
        left = round(seconds * 1e9)
        while True:
            with self._lock:
                if not self._schedule._heap:  # nothing waits (the common case): one step
                    self._move(left)
                    return
                due = self._schedule.next_due()
                if due is None or due > self._mono_ns + left:
                    self._move(left)
                    return
                step = max(due - self._mono_ns, 0)
                self._move(step)
                left -= step
                handle = self._schedule.pop_due(self._mono_ns)
            if handle is not None:
                handle.callback()  # outside the lock: it may read the clock or arm a timer

    def _move(self, step_ns: int) -> None:
        self._wall_ns += step_ns
        self._mono_ns += step_ns

    def sleep(self, seconds: float) -> None:
        self._slept(seconds)

    async def asleep(self, seconds: float) -> None:
        self._slept(seconds)
        await asyncio.sleep(0)  # still a point where other tasks run

    def _slept(self, seconds: float) -> None:
        """A sleep of any positive length lets at least a nanosecond pass, as a real one
        does: a loop sleeping what is left of a wait (a float, less than a nanosecond left
        after rounding) ends instead of sleeping for nothing for ever."""
        self.advance(max(seconds, 1e-9) if seconds > 0 else 0.0)

    def wait(self, condition: threading.Condition, until_ns: int | None) -> None:
        """Wait on ``condition`` (held by the caller) until an ``advance`` reaches
        ``until_ns``, or the waiter's own code notifies it (``None``: only then). An advance
        wakes no other waiter, so a wake-up the waiter's code forgets stays missing."""
        with self._lock:  # registered before the time is read: no advance goes unseen
            if until_ns is not None and self._mono_ns >= until_ns:
                return
            handle = (
                None if until_ns is None else self._schedule.add(until_ns, _notifier(condition))
            )
        try:
            condition.wait()
        finally:
            if handle is not None:
                handle.cancel()

    def loop_call_at(
        self, loop: asyncio.AbstractEventLoop, when_ns: int, callback: Callable[[], object]
    ) -> None:
        """Run ``callback`` on ``loop`` once the clock reaches ``when_ns`` (at once if it
        has); a loop closed meanwhile is skipped (held weakly: it may go away)."""
        with self._lock:
            if when_ns > self._mono_ns:
                self._schedule.add(when_ns, _on_loop(weakref.ref(loop), callback))
                return
        loop.call_soon_threadsafe(callback)

    def __repr__(self) -> str:
        return f"VirtualClock(at {self._mono_ns / 1e9:.6f} s)"


def _notifier(condition: threading.Condition) -> Callable[[], None]:
    def notify() -> None:
        with condition:  # taken once its waiter has let go of it, inside ``wait``
            condition.notify_all()

    return notify


def _on_loop(
    loop_ref: weakref.ref[asyncio.AbstractEventLoop], callback: Callable[[], object]
) -> Callable[[], None]:
    def fire() -> None:
        loop = loop_ref()
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # closed between the look and the call
            loop.call_soon_threadsafe(callback)

    return fire
