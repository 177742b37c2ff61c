"""Refused dispatches, logged with their reason: once per cause a minute.

A refused dispatch's reason goes back to the engine in the answer, where the operator of
the executor rarely looks; the executor's own log names it too. A cause is a handler and
a kind of refusal, a finite set, so a flood of bad dispatches writes a line per cause a
minute, saying how many more there were.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..store import SYSTEM_CLOCK, Clock

__all__ = ["Refusals"]


@dataclass(slots=True)
class _Cause:
    logged_at: int  # the clock's monotonic_ns
    since: int = 0  # refusals not logged since then


class Refusals:
    """Logs a refusal unless one of the same cause was logged less than ``every`` seconds
    ago on ``clock`` (the executor's ledger's)."""

    def __init__(
        self, log: logging.Logger, *, every: float = 60.0, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self._log = log
        self._every = every
        self._clock = clock
        self._causes: dict[tuple[str, str], _Cause] = {}

    def refused(self, handler: str, kind: str, status: int, reason: str) -> None:
        now = self._clock.monotonic_ns()
        cause = self._causes.get((handler, kind))
        if cause is not None and now - cause.logged_at < self._every * 1e9:
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
