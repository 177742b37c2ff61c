"""A test-only clock offset: a view of a store whose own clock reads some seconds later.

Stores judge leases, retention and notices on their own clocks (a database's ``now()``,
Redis's ``TIME``), so a test of what happens once a lease ran out would otherwise wait for
it. ``with_clock_offset(store, 31)`` answers a view of the same records whose server-side
"now" is 31 s ahead: a claim through it finds a 30 s lease run out, at once. Each store
offers it through a hook of its own (``_with_clock_offset(offset_us)``), reached from here
only: no store URL, option or public argument sets an offset, so a deployment cannot run
on a shifted clock by accident. A store without the hook is refused with ``TypeError``.
``with_frozen_clock(store, at_us)`` is the same with a clock that stands still at
``at_us``: every operation through it happens at that very microsecond.

Each view costs what the store's operations cost: one round trip an operation (SQL: the
offset is a literal of the view's own statements; Lua: one more ``ARGV`` of the view's
own scripts; memory: the view's anchor), and the store itself keeps its statements and
scripts as they are.
"""

from __future__ import annotations

from typing import Any, TypeVar

__all__ = ["with_clock_offset", "with_frozen_clock"]

S = TypeVar("S")
_MAX_OFFSET_S = 100 * 365 * 86400  # a century either way: a typo, not a test, beyond that


def with_clock_offset(store: S, seconds: float) -> S:
    """A view of ``store`` (a ``Store``: memory, SQL or Redis) whose clock reads ``seconds``
    later (earlier if negative) than the store's: the same records, judged at that time.

    Close the view when done; closing it never closes ``store``. Offsets are relative to
    ``store`` itself, so take every view from the store, not from another view."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise TypeError(f"seconds must be a number, not {seconds!r}")
    if not abs(seconds) <= _MAX_OFFSET_S:
        raise ValueError(f"a clock offset of {seconds!r} s is out of range (±{_MAX_OFFSET_S})")
    return _view(store, round(seconds * 1_000_000), frozen=False)


def with_frozen_clock(store: S, at_us: int) -> S:
    """A view of ``store`` whose clock stands at ``at_us`` (microseconds since the epoch,
    the stores' unit) for every operation: what a rule decides exactly at a lease's or a
    retention's end, which a running clock never lands on. Keep ``at_us`` near the
    store's own time (Redis expires its keys on its real clock). Close it as above."""
    if isinstance(at_us, bool) or not isinstance(at_us, int) or not 0 < at_us < 2**53:
        raise TypeError(f"at_us must be microseconds since the epoch (an int), not {at_us!r}")
    return _view(store, at_us, frozen=True)


def _view(store: S, offset_us: int, *, frozen: bool) -> S:
    hook: Any = getattr(store, "_with_clock_offset", None)
    if hook is None:
        raise TypeError(
            f"{type(store).__name__} offers no test clock: the memory, SQL and Redis stores"
            " do (their sync classes)"
        )
    view: S = hook(offset_us, frozen=frozen)
    return view
