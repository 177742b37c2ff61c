import pytest

from rill_executor.testing import StoreConformance


class TestMemoryStore(StoreConformance):
    multiprocess = False
    test_sigstopped_zombie_is_fenced = None  # type: ignore[assignment]  # not shareable

    @pytest.fixture
    def store_url(self) -> str:
        return "memory://"
