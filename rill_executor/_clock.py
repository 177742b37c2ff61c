"""Time as a port: the one way the core reads a clock or waits (invariant 22).

The ledger's decisions that depend on time — how long a claim's lease has left on this
process's clock, how long a joining call still waits, how long a failed finish keeps trying —
read it through a ``Clock``, and so does the in-memory store for its own clock. Given the same
inputs and the same clock, the core decides the same way, so tests drive it on a virtual clock
(``rill_executor.testing.VirtualClock``) without sleeping, and a simulation replays any
schedule exactly. The real stores judge leases on their servers' clocks, as always.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Protocol

from ._errors import ConfigError

__all__ = ["SYSTEM_CLOCK", "Clock", "SystemClock", "checked_clock"]


class Clock(Protocol):
    """What the core asks of time: the ``time`` module's own three functions."""

    def monotonic_ns(self) -> int:
        """Nanoseconds on a clock that never goes back (deadlines in this process)."""
        ...

    def time_ns(self) -> int:
        """Nanoseconds since the epoch (the wall clock: a store's anchor)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (a sync ledger's pause between two looks at a job)."""
        ...

    async def asleep(self, seconds: float) -> None:
        """``sleep``'s asyncio twin (an ``AsyncLedger``'s pause)."""
        ...

    def wait(self, condition: threading.Condition, until_ns: int | None) -> None:
        """Wait on ``condition`` (held) until it is notified or ``monotonic_ns`` reaches
        ``until_ns`` (None: until notified). Unlike ``sleep``, the time is passed by others:
        the heartbeat thread's wait for the next renewal due."""
        ...

    def loop_call_at(
        self, loop: asyncio.AbstractEventLoop, when_ns: int, callback: Callable[[], object]
    ) -> None:
        """Run ``callback`` in ``loop`` once ``monotonic_ns`` reaches ``when_ns``: an event
        loop's heartbeat timer."""
        ...


class SystemClock:
    """The process's own clocks."""

    monotonic_ns = staticmethod(time.monotonic_ns)
    time_ns = staticmethod(time.time_ns)
    sleep = staticmethod(time.sleep)
    asleep = staticmethod(asyncio.sleep)

    @staticmethod
    def wait(condition: threading.Condition, until_ns: int | None) -> None:
        condition.wait(None if until_ns is None else max(0, until_ns - time.monotonic_ns()) / 1e9)

    @staticmethod
    def loop_call_at(
        loop: asyncio.AbstractEventLoop, when_ns: int, callback: Callable[[], object]
    ) -> None:
        # The loop's own clock need not be this one: only the delay carries over.
        loop.call_at(loop.time() + (when_ns - time.monotonic_ns()) / 1e9, callback)

    def __repr__(self) -> str:
        return "SystemClock()"


SYSTEM_CLOCK = SystemClock()


def checked_clock(clock: object) -> Clock:
    """``clock``, or ``ConfigError`` naming what it lacks (before anything reads it)."""
    missing = [
        name
        for name in ("monotonic_ns", "time_ns", "sleep", "asleep", "wait", "loop_call_at")
        if not callable(getattr(clock, name, None))
    ]
    if missing:
        raise ConfigError(
            f"clock={clock!r} is not a Clock: it has no {', '.join(missing)}. Pass"
            " rill_executor.store.SYSTEM_CLOCK (the default) or a"
            " rill_executor.testing.VirtualClock"
        )
    return clock  # type: ignore[return-value]
