"""When a store checks its safety settings again while it is used (invariant 21), and
what the last check found (no I/O).

A store's durability settings (Redis: AOF, fsync, eviction; PostgreSQL: fsync,
synchronous_commit; MariaDB: innodb_flush_log_at_trx_commit) can change under a running
store. A store checks them at open and then, before a claim, whenever ``Recheck.due()``:
after ``connected()`` (its client made a new connection, where a changed setting shows
first; at most once a second) or ``every`` seconds after the last check, so a busy store
pays the check's round trips once per interval, not per claim. ``checked(risks)`` takes
what the check found; under ``require`` it and ``refuse()`` raise ``UnsafeDeployment``
until a check finds no risk, so claims stay refused until the store is safe again; under
``warn`` a check that finds new risks warns (``DurabilityWarning``).
"""

from __future__ import annotations

import sys
import threading
import time
import warnings
from collections.abc import Callable

from ._errors import DurabilityWarning, UnsafeDeployment

__all__ = ["Recheck", "callers_level"]

RECHECK_EVERY = 30.0
"""Seconds between two checks of a store in use without a new connection."""

RECHECK_AFTER = 1.0
"""Seconds after a check before a new connection makes the next one due: a pool that
opens connections in a burst (or an event loop's pool, disposed with its loop) is checked
once a second at most, not once per connection."""


class Recheck:
    """See the module docs. ``policy``: ``warn``, ``require`` or ``ignore`` (never due);
    ``describe`` turns the risks found into the message of the warning or the error."""

    def __init__(
        self,
        policy: str,
        describe: Callable[[list[str]], str],
        every: float = RECHECK_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.policy, self._describe, self.every, self._clock = str(policy), describe, every, clock
        self._last = clock()  # the store checks at open
        self._next = self._last + every
        self._connected = False
        self._risks: list[str] = []
        self._lock = threading.Lock()

    def connected(self, *_: object) -> None:
        """A new connection was made (a connect hook's arguments are ignored)."""
        self._connected = True

    def due(self) -> bool:
        if self.policy == "ignore":
            return False
        now = self._clock()
        return (self._connected and now >= self._last + RECHECK_AFTER) or now >= self._next

    def checked(self, risks: list[str]) -> None:
        """What a check found; raises or warns as the policy says (see the module docs)."""
        with self._lock:
            new = [risk for risk in risks if risk not in self._risks]
            self._risks = list(risks)
            self._connected = False
            self._last = self._clock()
            self._next = self._last + self.every
        if new and self.policy == "warn":
            warnings.warn(self._describe(new), DurabilityWarning, stacklevel=callers_level())
        self.refuse()

    def refuse(self) -> None:
        """``UnsafeDeployment`` while the last check found risks under ``require``."""
        if self._risks and self.policy == "require":
            raise UnsafeDeployment(self._describe(self._risks))


def callers_level() -> int:
    """The ``stacklevel`` that points a warning raised by our caller at the first frame
    outside this library (``rill_executor`` and its adapters): the user's line that opened
    or used the store, however many of our calls lie between (``Ledger(url)``,
    ``open_store``, ``RedisStore.from_url``, an awaited ``check_durability``, a claim)."""
    frame = sys._getframe(1)  # the caller, which calls warnings.warn: stacklevel 1
    level = 1
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith(
        "rill_executor"
    ):
        frame, level = frame.f_back, level + 1
    return level
