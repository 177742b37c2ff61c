"""The engine's retry policy: how many attempts a task gets and how long it waits between them."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rill_executor._errors import ConfigError

__all__ = ["Retry"]


@dataclass(frozen=True)
class Retry:
    """A task's ``retry`` block: ``maxRetryTimes``, ``intervalInSeconds``, ``multiplier``.

    A task gets ``max_retry_times + 1`` attempts in all. The delay before retry *k*
    (k = 1, 2, …, the number of attempts made so far) is what the engine's
    ``SimpleRetryPolicy.calculateRetryInterval`` computes: ``int(interval * multiplier**k)``
    seconds, truncated toward zero. A whole-number ``interval_in_seconds`` gives exactly the
    engine's delays; a fractional one (the engine only takes integers) is not truncated, so
    a test can use sub-second delays with the same growth: ``interval * multiplier**k``.
    """

    max_retry_times: int = 0
    interval_in_seconds: float = 0
    multiplier: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.max_retry_times, bool) or not isinstance(self.max_retry_times, int):
            raise ConfigError(
                f"max_retry_times must be an int, got {self.max_retry_times!r}; "
                "pass the number of retries after the first attempt"
            )
        if self.max_retry_times < 0:
            raise ConfigError(f"max_retry_times must be >= 0, got {self.max_retry_times}")
        if not math.isfinite(self.interval_in_seconds) or self.interval_in_seconds < 0:
            raise ConfigError(
                "interval_in_seconds must be a finite number >= 0, "
                f"got {self.interval_in_seconds!r}"
            )
        if not math.isfinite(self.multiplier) or self.multiplier <= 0:
            raise ConfigError(f"multiplier must be a finite number > 0, got {self.multiplier!r}")

    @property
    def total_attempts(self) -> int:
        """Attempts the task gets in all: the first one plus the retries."""
        return self.max_retry_times + 1

    def allows_retry(self, attempts_made: int) -> bool:
        """Whether a task that failed after ``attempts_made`` attempts is retried."""
        return attempts_made <= self.max_retry_times

    def delay_before_retry(self, k: int) -> float:
        """Seconds to wait before retry ``k`` (k >= 1), as the engine computes them."""
        if k < 1:
            raise ConfigError(f"retries are numbered from 1, got {k}")
        delay = self.interval_in_seconds * self.multiplier**k
        if float(self.interval_in_seconds).is_integer():
            return float(int(delay))
        return delay
