"""The engine's retry policy: how many attempts a task gets and how long it waits between them."""

from __future__ import annotations

from dataclasses import dataclass

from rill_executor import RetryPolicy

__all__ = ["Retry"]


@dataclass(frozen=True)
class Retry(RetryPolicy):
    """A task's ``retry`` block: ``maxRetryTimes``, ``intervalInSeconds``, ``multiplier``.

    A task gets ``max_retry_times + 1`` attempts in all. The delay before retry *k*
    (k = 1, 2, …, the number of attempts made so far) is what the engine's
    ``SimpleRetryPolicy.calculateRetryInterval`` computes: ``int(interval * multiplier**k)``
    seconds, truncated toward zero (``RetryPolicy``, the one the ledger checks its retention
    against). On the engine ``intervalInSeconds`` is an Integer: the simulator's default
    clock cuts a fraction off (``0.5`` retries at once) and fires each retry at the engine's
    next 3 s poll; ``EngineSimulator(timers="exact")`` takes a fraction as given.
    """

    def allows_retry(self, attempts_made: int) -> bool:
        """Whether a task that failed after ``attempts_made`` attempts is retried."""
        return attempts_made <= self.max_retry_times
