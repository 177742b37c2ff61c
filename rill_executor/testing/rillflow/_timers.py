"""Where the simulated engine's retries and timeouts wait: a schedule keyed by due time, run
by a thread on the real clock or by a virtual clock's ``advance``."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from rill_executor.store import Clock

from .._clock import Schedule, TimerHandle

__all__ = ["Instants", "RealTimeTimers", "Timers", "timers_for"]

Instant = tuple[int, int]  # (time_ns, monotonic_ns) of one clock


class Timers(Protocol):
    """What runs the engine's timers: ``call_at`` a ``monotonic_ns`` of the engine's clock."""

    def call_at(self, when_ns: int, callback: Callable[[], None]) -> TimerHandle: ...


class RealTimeTimers:
    """A ``Schedule`` run by one daemon thread as the real clock reaches each due time."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._schedule = Schedule()
        self._changed = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None

    def call_at(self, when_ns: int, callback: Callable[[], None]) -> TimerHandle:
        with self._changed:
            if self._thread is None:  # started on first use: a simulator never started has none
                self._thread = threading.Thread(
                    target=self._run, name="rillflow-timers", daemon=True
                )
                self._thread.start()
            handle = self._schedule.add(when_ns, callback)
            self._changed.notify()
            return handle

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        while True:
            with self._changed:
                while True:
                    if self._closed:
                        return
                    now = self._clock.monotonic_ns()
                    handle = self._schedule.pop_due(now)
                    if handle is not None:
                        break
                    due = self._schedule.next_due()
                    self._changed.wait(None if due is None else (due - now) / 1e9)
            handle.callback()


def timers_for(clock: Clock) -> Timers:
    """The clock itself when it runs timers (a ``VirtualClock``), else a real-time runner."""
    call_at = getattr(clock, "call_at", None)
    if callable(call_at):
        return clock  # type: ignore[return-value]
    return RealTimeTimers(clock)


class Instants:
    """The engine's time as the work of each thread sees it (``time_ns``, ``monotonic_ns``).

    Work handed to a thread starts at the instant it was set off — a timer's due instant, a
    dispatch's request — not when a thread got to it. On the real clock the time that passes
    while it runs is added (the two differ by a thread's start-up). On a clock that runs its
    timers itself (``timeless``: a virtual clock) the work takes no time, as an event of a
    discrete simulation: an ``advance`` that moves on meanwhile, in another thread, leaves no
    trace in its records or in the timers it arms, which is what makes a run repeatable.
    """

    def __init__(self, clock: Clock, *, timeless: bool) -> None:
        self._clock = clock
        self._timeless = timeless
        self._local = threading.local()

    def now(self) -> Instant:
        base: tuple[int, int, int] | None = getattr(self._local, "base", None)
        if base is None:
            return self._clock.time_ns(), self._clock.monotonic_ns()
        wall, mono, started = base
        passed = 0 if self._timeless else self._clock.monotonic_ns() - started
        return wall + passed, mono + passed

    def time_ns(self) -> int:
        return self.now()[0]

    def monotonic_ns(self) -> int:
        return self.now()[1]

    def bind(self, work: Callable[[], None], at: Instant | None = None) -> Callable[[], None]:
        """``work``, to run in another thread as from ``at`` (default: this thread's now)."""
        wall, mono = self.now() if at is None else at

        def run() -> None:
            self._local.base = wall, mono, self._clock.monotonic_ns()
            try:
                work()
            finally:
                self._local.base = None

        return run
