"""What every group of the kit shares: the store's flags and the fixtures that open it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from .._driver import DrivenLedger, LedgerDriver

__all__ = ["KitBase"]


class KitBase:
    """The flags a store sets on its ``StoreConformance`` subclass, and the kit's fixtures.

    ``multiprocess = False``: the store lives inside one process (the race then runs on
    threads). ``exact_listing = False``: the store lists jobs by scanning (Redis), so its
    pages may hold more than ``limit`` jobs and, while its keyspace is resized, repeat a
    job. ``expires_records = True``: the store deletes a finished record by itself at its
    ``retain_until``, so a purge may find fewer of them to delete.
    """

    multiprocess = True
    exact_listing = True
    expires_records = False

    @pytest.fixture(params=["sync", "async"])
    def driver(self, request: pytest.FixtureRequest, store_url: str) -> Iterator[LedgerDriver]:
        driver = LedgerDriver(store_url, request.param)
        yield driver
        driver.close()

    @pytest.fixture
    def namespace(self) -> str:
        return f"t{uuid.uuid4().hex[:16]}"

    @pytest.fixture
    def ledger(self, driver: LedgerDriver, namespace: str) -> DrivenLedger:
        return driver.ledger(namespace, lease=30)

    def _purge_all(self, ledger: DrivenLedger, **options: Any) -> tuple[int, int, int]:
        """Purge page by page until the cursor is None: (purged, kept_notices, calls)."""
        purged = kept = calls = 0
        cursor = None
        limit = options.pop("limit", 1000)
        most = 100 if self.exact_listing else 100_000  # a scan may take many short calls
        for calls in range(1, most + 1):
            report = ledger.purge(after=cursor, limit=limit, **options)
            assert report.purged <= limit, f"one call deleted {report.purged} > {limit}"
            purged, kept = purged + report.purged, kept + report.kept_notices
            if (cursor := report.cursor) is None:
                return purged, kept, calls
        raise AssertionError("the purge never ended")
