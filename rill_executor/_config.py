"""``LedgerConfig``: a ledger's settings, checked once and frozen.

Built by ``Ledger`` / ``AsyncLedger`` from their keyword arguments; everything below them
(the claim decisions, the call step, the claims) reads this one object.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from ._codec import DEFAULT_MAX_RESULT_BYTES
from ._duplicate_window import DuplicateWindow
from ._errors import ConfigError
from ._keys import validate_namespace

__all__ = ["LEASE_OVER_WAIT", "LedgerConfig", "Seconds", "check_lease", "to_us"]

Seconds = timedelta | float | int


def to_us(value: Seconds, what: str, *, zero: bool = False) -> int:
    if isinstance(value, timedelta):
        us = value // timedelta(microseconds=1)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        us = int(value * 1_000_000)
    else:
        raise ConfigError(f"{what} must be a timedelta or seconds, got {value!r}")
    if us < 0 or (us == 0 and not zero):
        raise ConfigError(f"{what} must be {'zero or more' if zero else 'positive'}, got {value!r}")
    return us


LEASE_OVER_WAIT = 2
"""A lease is at least this many times the longest a store may wait on its server: an
operation stuck until its bound runs out must not outlive the lease it renews or protects."""


def check_lease(lease_us: int, store: object, what: str) -> None:
    """Refuse ``lease`` when the store's longest wait (its optional ``longest_wait``, in
    seconds) is not well under it."""
    inner = getattr(store, "sync", store)  # an async face over a sync store
    longest = getattr(inner, "longest_wait", None)
    if not isinstance(longest, (int, float)) or lease_us >= LEASE_OVER_WAIT * longest * 1e6:
        return
    raise ConfigError(
        f"the {what} ({lease_us / 1e6:g} s) must be at least {LEASE_OVER_WAIT} times the"
        f" store's longest wait ({longest:g} s), or a store operation stuck until its bound"
        " ran out could outlive the lease: lengthen the lease, or shorten the store's bounds"
        " (for a SQL store, its URL's statement_timeout, lock_timeout,"
        " idle_in_transaction_timeout, read_timeout, connect_timeout or busy_timeout)"
    )


@dataclass(frozen=True, slots=True)
class LedgerConfig:
    namespace: str
    lease_us: int
    retention_us: int
    max_result_bytes: int
    duplicate_window: DuplicateWindow | Seconds | None = None  # as given, checked

    @classmethod
    def build(
        cls,
        *,
        namespace: str,
        lease: Seconds = timedelta(seconds=30),
        retention: Seconds = timedelta(days=7),
        duplicate_window: DuplicateWindow | Seconds | None = None,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    ) -> LedgerConfig:
        try:
            validate_namespace(namespace)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        lease_us = to_us(lease, "lease")
        retention_us = to_us(retention, "retention")
        if retention_us <= lease_us:
            raise ConfigError(
                f"retention ({retention_us / 1e6:g}s) must be longer than the lease"
                f" ({lease_us / 1e6:g}s): a result must outlive the attempts that race for it"
            )
        _check_window(duplicate_window, retention_us)
        if not isinstance(max_result_bytes, int) or max_result_bytes <= 0:
            raise ConfigError(f"max_result_bytes must be a positive int, got {max_result_bytes!r}")
        return cls(namespace, lease_us, retention_us, max_result_bytes, duplicate_window)

    def lease_of(self, lease: Seconds | None) -> int:
        """``lease`` in microseconds, or the ledger's when None."""
        return self.lease_us if lease is None else to_us(lease, "lease")


def _check_window(window: DuplicateWindow | Seconds | None, retention_us: int) -> None:
    if isinstance(window, DuplicateWindow):
        window.check(timedelta(microseconds=retention_us))
    elif window is not None:
        window_us = to_us(window, "duplicate_window")
        if retention_us < window_us:
            raise ConfigError(
                f"retention ({retention_us / 1e6:g}s) is shorter than the engine's"
                f" duplicate window ({window_us / 1e6:g}s: retry delays + timeouts +"
                " late-callback grace). A duplicate arriving after the record is"
                " collected would run the work again; set retention to at least"
                f" {math.ceil(window_us / 1e6)}s"
            )
