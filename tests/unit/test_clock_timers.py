"""A ``VirtualClock`` runs the callbacks left with it as its time passes: each at its due
instant, in due order, those of one instant in the order they were left, and a callback a
callback arms is taken in turn within the same ``advance``."""

from __future__ import annotations

import asyncio
import threading

import pytest

from rill_executor.testing import VirtualClock
from rill_executor.testing._clock import Schedule


def test_advance_runs_the_due_callbacks_in_due_order_each_at_its_instant() -> None:
    clock = VirtualClock()
    seen: list[tuple[str, int]] = []
    wall = clock.time_ns()
    clock.call_later(2.0, lambda: seen.append(("b", clock.monotonic_ns())))
    clock.call_at(1_000_000_000, lambda: seen.append(("a", clock.monotonic_ns())))
    clock.call_later(2.0, lambda: seen.append(("b2", clock.monotonic_ns())))  # same instant
    clock.call_later(9.0, lambda: seen.append(("late", clock.monotonic_ns())))

    clock.advance(0.999999999)
    assert seen == []  # nothing fires before its time

    clock.advance(2.000000001)

    assert seen == [("a", 10**9), ("b", 2 * 10**9), ("b2", 2 * 10**9)]
    assert clock.monotonic_ns() == 3 * 10**9  # the whole step, callbacks or not
    assert clock.time_ns() == wall + 3 * 10**9  # the wall clock moved alike


def test_a_callback_reads_its_due_instant_and_what_it_arms_is_taken_in_turn() -> None:
    clock = VirtualClock()
    seen: list[tuple[str, int]] = []

    def first() -> None:
        seen.append(("first", clock.monotonic_ns()))
        clock.call_later(0.5, lambda: seen.append(("armed", clock.monotonic_ns())))

    clock.call_later(1.0, first)
    clock.call_later(1.7, lambda: seen.append(("after", clock.monotonic_ns())))

    clock.advance(5)

    assert seen == [("first", 10**9), ("armed", 1_500_000_000), ("after", 1_700_000_000)]


def test_a_cancelled_callback_never_runs_and_a_past_one_runs_at_the_next_advance() -> None:
    clock = VirtualClock()
    clock.advance(5)
    seen: list[str] = []
    clock.call_later(1, lambda: seen.append("cancelled")).cancel()
    clock.call_at(0, lambda: seen.append("past"))  # already due: runs now, time stays
    clock.call_later(-3, lambda: seen.append("negative"))  # at least 0: due now

    clock.advance(0)

    assert seen == ["past", "negative"]
    clock.advance(10)
    assert seen == ["past", "negative"]
    assert clock.monotonic_ns() == 15 * 10**9


def test_a_sleep_on_the_clock_fires_what_falls_due_meanwhile() -> None:
    clock = VirtualClock()
    seen: list[str] = []
    clock.call_later(1, lambda: seen.append("sync"))
    clock.call_later(3, lambda: seen.append("async"))

    clock.sleep(2)
    assert seen == ["sync"]
    asyncio.run(clock.asleep(2))
    assert seen == ["sync", "async"]


def test_a_raising_callback_stops_the_advance_at_its_instant() -> None:
    clock = VirtualClock()

    def broken() -> None:
        raise ZeroDivisionError

    clock.call_later(1, broken)
    with pytest.raises(ZeroDivisionError):
        clock.advance(4)
    assert clock.monotonic_ns() == 10**9


def test_callbacks_fire_once_each_when_threads_advance_together() -> None:
    clock = VirtualClock()
    fired: list[int] = []
    lock = threading.Lock()

    def note(index: int) -> None:
        with lock:
            fired.append(index)

    for index in range(200):
        clock.call_later(index * 0.01, lambda index=index: note(index))  # type: ignore[misc]

    def tick() -> None:
        for _ in range(150):
            clock.advance(0.01)

    threads = [threading.Thread(target=tick) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(fired) == list(range(200))
    assert clock.monotonic_ns() == 3 * 10**9


def test_a_schedule_gives_back_due_callbacks_only_in_due_then_added_order() -> None:
    schedule = Schedule()
    assert schedule.next_due() is None
    late = schedule.add(20, lambda: None)
    first = schedule.add(10, lambda: None)
    second = schedule.add(10, lambda: None)
    first.cancel()
    assert schedule.next_due() == 10
    assert schedule.pop_due(9) is None
    assert schedule.pop_due(10) is second
    assert schedule.pop_due(19) is None
    assert schedule.pop_due(25) is late
    assert schedule.pop_due(10**9) is None
