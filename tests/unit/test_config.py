from datetime import timedelta

import pytest

from rill_executor import ConfigError, Ledger, MemoryStore, UsageError, current_claim
from rill_executor._registry import open_store


def test_retention_must_cover_the_duplicate_window() -> None:
    with pytest.raises(ConfigError, match="duplicate window"):
        Ledger(
            MemoryStore(),
            namespace="n",
            retention=timedelta(hours=1),
            duplicate_window=timedelta(hours=2),
        )
    ledger = Ledger(
        MemoryStore(),
        namespace="n",
        retention=timedelta(hours=3),
        duplicate_window=timedelta(hours=2),
    )
    assert ledger.retention == timedelta(hours=3)


def test_unknown_scheme_lists_the_installed_ones() -> None:
    with pytest.raises(ConfigError, match=r"no store adapter for scheme 'cassandra'.*memory"):
        open_store("cassandra://host/jobs")
    with pytest.raises(ConfigError, match="no scheme"):
        open_store("jobs.db")


def test_current_claim_outside_a_handler() -> None:
    with pytest.raises(UsageError, match="only available inside"):
        current_claim()


def test_async_ledger_refuses_plain_functions() -> None:
    from rill_executor import AsyncLedger, AsyncMemoryStore

    ledger = AsyncLedger(AsyncMemoryStore(), namespace="n")
    with pytest.raises(ConfigError, match="async def"):
        ledger.idempotent(key=lambda: "k")(lambda: 1)
