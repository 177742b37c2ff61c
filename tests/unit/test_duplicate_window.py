"""The engine's duplicate window and the retention the ledger refuses against it."""

from datetime import timedelta

import pytest

from rill_executor import AsyncLedger, ConfigError, DuplicateWindow, Ledger, RetryPolicy
from rill_executor.store import AsyncMemoryStore, MemoryStore


def test_delays_follow_the_engines_formula() -> None:
    # Rill Flow: delay before retry k is int(interval * multiplier**k), k from 1.
    assert RetryPolicy(3, 10, 2).delays() == [20.0, 40.0, 80.0]
    assert RetryPolicy(3, 5, 1.5).delays() == [7.0, 11.0, 16.0]  # 7.5, 11.25, 16.875
    assert RetryPolicy(4, 1, 0.5).delays() == [0.0, 0.0, 0.0, 0.0]
    assert RetryPolicy(0, 10, 2).delays() == []


def test_the_window_adds_attempts_times_timeout_delays_and_grace() -> None:
    window = DuplicateWindow(
        RetryPolicy(max_retry_times=3, interval_in_seconds=10, multiplier=2),
        task_timeout=timedelta(minutes=10),
        grace=timedelta(minutes=5),
    )
    # 4 attempts x 600 s + (20 + 40 + 80) s + 300 s
    assert window.length == timedelta(seconds=2400 + 140 + 300)
    assert "4 attempts x 600s timeout + retry delays 20+40+80s + 300s grace" in window.describe()


@pytest.mark.parametrize("make", [Ledger, AsyncLedger])
def test_a_ledger_refuses_a_retention_shorter_than_the_window(make: type) -> None:
    store = MemoryStore() if make is Ledger else AsyncMemoryStore()
    window = DuplicateWindow(RetryPolicy(3, 10, 2), task_timeout=timedelta(minutes=10))
    with pytest.raises(ConfigError, match=r"set retention=timedelta\(seconds=2540\) or longer"):
        make(store, namespace="n", retention=timedelta(seconds=2539), duplicate_window=window)
    ledger = make(store, namespace="n", retention=timedelta(seconds=2540), duplicate_window=window)
    assert ledger.retention == timedelta(seconds=2540)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: RetryPolicy(-1), "max_retry_times must be >= 0"),
        (lambda: RetryPolicy(1.5), "max_retry_times must be an int"),  # type: ignore[arg-type]
        (lambda: RetryPolicy(1, -1), "interval_in_seconds must be"),
        (lambda: RetryPolicy(1, 1, 0), "multiplier must be"),
        (lambda: DuplicateWindow(RetryPolicy(), timedelta(seconds=-1)), "task_timeout must be"),
        (lambda: DuplicateWindow(RetryPolicy(), 60), "task_timeout must be"),  # type: ignore[arg-type]
        (lambda: DuplicateWindow(RetryPolicy(99, 10, 10), timedelta(0)).length, "retry 13 would"),
    ],
)
def test_bad_policies_are_refused_with_what_to_fix(build: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build()  # type: ignore[operator]
