"""A clock that moves only when told: the ledger and the in-memory store on simulated time."""

from __future__ import annotations

import asyncio
import threading

__all__ = ["VirtualClock"]

_EPOCH_NS = 1_767_225_600 * 10**9  # 2026-01-01T00:00:00Z: any fixed instant keeps runs alike


class VirtualClock:
    """A ``Clock`` (``rill_executor.store.Clock``) whose time passes by ``advance`` or by a
    ``sleep`` of the ledger using it, never by itself: a wait of minutes costs nothing, and
    the same steps give the same times. Pass one to ``Ledger(clock=…)`` and
    ``MemoryStore(clock=…)``."""

    def __init__(self, start_ns: int = _EPOCH_NS) -> None:
        self._lock = threading.Lock()
        self._wall_ns = start_ns
        self._mono_ns = 0

    def monotonic_ns(self) -> int:
        return self._mono_ns

    def time_ns(self) -> int:
        return self._wall_ns

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass (at least 0)."""
        if seconds < 0:
            raise ValueError(f"time does not go back: advance({seconds!r})")
        step = round(seconds * 1e9)
        with self._lock:
            self._wall_ns += step
            self._mono_ns += step

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

    def __repr__(self) -> str:
        return f"VirtualClock(at {self._mono_ns / 1e9:.6f} s)"
