"""The recovery a drill expects of every fault kind, and whether a kind met it.

Every fault's recovery waits on at most one lease running out (a dead owner's job lease, or
the notice lease of a deliverer that died mid-send), then on one engine retry (a retry of a
failed or timed-out task fires at the engine's 3-s poll), then on the work and one callback.
So: recovery p99 at most the lease plus the engine's retry interval plus 2 s, and no maximum
above twice the p99 (an outlier is a cause to find, not noise).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...rillflow import ENGINE_POLL, NOTICE_LEASE

__all__ = ["ENGINE_RETRY", "SLACK", "RecoveryTarget"]

ENGINE_RETRY = 2.0 + ENGINE_POLL
"""The engine's retry interval as it fires: the first retry of a task with
``intervalInSeconds: 1, multiplier: 2`` (``int(1 * 2 ** 1)`` = 2 s, the transcode example's;
the drill's own segments retry after 1 s) plus one 3-s poll of its timers."""

SLACK = 2.0
"""Seconds for the work itself, the deliverer's 1-s poll and one callback."""


@dataclass(frozen=True)
class RecoveryTarget:
    """``lease``: the longest lease a recovery can wait for, the executors' job lease or
    their deliverers' notice lease; ``engine_retry``: the engine's retry interval as it fires."""

    lease: float = NOTICE_LEASE
    engine_retry: float = ENGINE_RETRY

    @property
    def p99(self) -> float:
        """The most a kind's recovery p99 may be, in seconds."""
        return self.lease + self.engine_retry + SLACK

    def met(self, hits: int, recovered: int, p99: float | None, most: float | None) -> bool | None:
        """Whether a kind whose faults hit ``hits`` tasks, ``recovered`` of which reached
        SUCCEED (p99 and max of their recoveries), met the target; None when nothing was hit.
        A task that never recovered misses it."""
        if hits == 0:
            return None
        if recovered < hits or p99 is None or most is None:
            return False
        return p99 <= self.p99 and most <= 2 * p99

    def describe(self) -> str:
        return (
            f"p99 <= {self.p99:g} s (lease {self.lease:g} + engine retry"
            f" {self.engine_retry:g} + {SLACK:g}), max <= 2 x p99"
        )
