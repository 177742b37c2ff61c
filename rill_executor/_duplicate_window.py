"""The engine's duplicate window: how long after a task's first dispatch a duplicate may come.

An engine that retries a task dispatches the same business key again long after the first
attempt. A record collected before the last duplicate arrives lets that duplicate run the
work a second time, so retention must cover the window. For Rill Flow:

- the task gets ``maxRetryTimes + 1`` attempts;
- the delay before retry *k* (k = 1, 2, …) is ``int(intervalInSeconds * multiplier**k)``
  seconds (the engine's ``SimpleRetryPolicy``; note the first retry already waits
  ``interval * multiplier``);
- each attempt may last the task timeout (``timeline.timeoutInSeconds``, armed for async
  tasks; for a sync task, the dispatch's own HTTP time) before the engine retries it;
- a late callback, an external worker's completion or an operator's redo may come later
  still: the grace.

``window = attempts x timeout + Σ delays + grace``, counted from the first dispatch. A
job's retention starts when the job ends, never before its first dispatch, so a retention of
at least the window keeps the record until the last duplicate has come.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from ._errors import ConfigError

__all__ = ["DuplicateWindow", "RetryPolicy"]

_MAX_SECONDS = timedelta.max.total_seconds()


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """A task's ``retry`` block: ``maxRetryTimes``, ``intervalInSeconds``, ``multiplier``.

    A whole-number ``interval_in_seconds`` gives exactly the engine's delays (truncated
    toward zero); a fractional one (the engine only takes integers) is not truncated, so a
    test can use sub-second delays with the same growth.
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
        if not _number(self.interval_in_seconds) or self.interval_in_seconds < 0:
            raise ConfigError(
                "interval_in_seconds must be a finite number >= 0, "
                f"got {self.interval_in_seconds!r}"
            )
        if not _number(self.multiplier) or self.multiplier <= 0:
            raise ConfigError(f"multiplier must be a finite number > 0, got {self.multiplier!r}")

    @property
    def total_attempts(self) -> int:
        """Attempts the task gets in all: the first one plus the retries."""
        return self.max_retry_times + 1

    def delay_before_retry(self, k: int) -> float:
        """Seconds to wait before retry ``k`` (k >= 1), as the engine computes them."""
        if k < 1:
            raise ConfigError(f"retries are numbered from 1, got {k}")
        try:
            delay = self.interval_in_seconds * self.multiplier**k
        except OverflowError:
            delay = math.inf
        if not math.isfinite(delay) or delay > _MAX_SECONDS:
            raise ConfigError(
                f"retry {k} would wait more than {_MAX_SECONDS:g}s"
                f" ({self.interval_in_seconds:g} x {self.multiplier:g}^{k}): no record can"
                " be kept that long; lower multiplier or maxRetryTimes"
            )
        if float(self.interval_in_seconds).is_integer():
            return float(int(delay))
        return delay

    def delays(self) -> list[float]:
        """The delay before each retry, in order."""
        found: list[float] = []
        for k in range(1, self.max_retry_times + 1):
            found.append(self.delay_before_retry(k))
            if found[-1] == 0 and self.multiplier <= 1:  # never grows again
                found.extend([0.0] * (self.max_retry_times - k))
                break
        return found


@dataclass(frozen=True, slots=True)
class DuplicateWindow:
    """How long after a task's first dispatch a duplicate of it may still arrive.

    ``retry`` is the task's retry policy, ``task_timeout`` how long one attempt may run
    before the engine retries it, ``grace`` the slack for late callbacks and redo habits.
    """

    retry: RetryPolicy
    task_timeout: timedelta
    grace: timedelta = timedelta(0)

    def __post_init__(self) -> None:
        if not isinstance(self.retry, RetryPolicy):
            raise ConfigError(f"retry must be a RetryPolicy, got {self.retry!r}")
        for name in ("task_timeout", "grace"):
            value = getattr(self, name)
            if not isinstance(value, timedelta) or value < timedelta(0):
                raise ConfigError(f"{name} must be a timedelta of zero or more, got {value!r}")

    @property
    def delays(self) -> list[float]:
        """Seconds before each retry."""
        return self.retry.delays()

    @property
    def length(self) -> timedelta:
        """The whole window: attempts x timeout + the retry delays + the grace."""
        seconds = (
            self.retry.total_attempts * self.task_timeout.total_seconds()
            + math.fsum(self.delays)
            + self.grace.total_seconds()
        )
        if seconds > _MAX_SECONDS:
            raise ConfigError(
                f"the duplicate window would be {seconds:g}s, longer than any record can be"
                " kept; lower maxRetryTimes, multiplier or the task timeout"
            )
        return timedelta(seconds=seconds)

    def describe(self) -> str:
        """How the window adds up, for a message."""
        delays = self.delays
        shown = "+".join(f"{d:g}" for d in delays[:6]) + ("+…" if len(delays) > 6 else "")
        return (
            f"{self.retry.total_attempts} attempts x {self.task_timeout.total_seconds():g}s"
            f" timeout + retry delays {shown or '0'}s + {self.grace.total_seconds():g}s grace"
        )

    def check(self, retention: timedelta) -> None:
        """``ConfigError`` saying what to set if ``retention`` does not cover the window."""
        window = self.length
        if retention < window:
            raise ConfigError(
                f"retention ({retention.total_seconds():g}s) is shorter than the engine's"
                f" duplicate window ({window.total_seconds():g}s: {self.describe()}). A"
                " duplicate arriving after the record is collected would run the work again;"
                f" set retention=timedelta(seconds={math.ceil(window.total_seconds())}) or"
                " longer, or shorten the engine's retries"
            )


def _number(value: object) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )
