"""Refused dispatches, logged with their reason: once per cause a minute.

A refused dispatch's reason goes back to the engine in the answer, where the operator of
the executor rarely looks; the executor's own log names it too. A cause is a handler and
a kind of refusal, a finite set, so a flood of bad dispatches writes a line per cause a
minute, saying how many more there were.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Refusals"]


@dataclass(slots=True)
class _Cause:
    logged_at: float
    since: int = 0  # refusals not logged since then


class Refusals:
    """Logs a refusal unless one of the same cause was logged less than ``every`` ago."""

    def __init__(
        self,
        log: logging.Logger,
        *,
        every: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = log
        self._every = every
        self._clock = clock
        self._causes: dict[tuple[str, str], _Cause] = {}

    def refused(self, handler: str, kind: str, status: int, reason: str) -> None:
        now = self._clock()
        cause = self._causes.get((handler, kind))
        if cause is not None and now - cause.logged_at < self._every:
            cause.since += 1
            return
        more = f"{cause.since} more since the last report; " if cause and cause.since else ""
        self._causes[(handler, kind)] = _Cause(now)
        self._log.warning(
            "refused a dispatch to %s (%d %s): %s (%seach cause logged at most once in %.0f s)",
            handler,
            status,
            kind,
            reason,
            more,
            self._every,
        )
