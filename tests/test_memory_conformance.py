import pytest

from rill_executor.testing import StoreConformance


class TestMemoryStore(StoreConformance):
    multiprocess = False
    test_sigstopped_zombie_is_fenced = None  # a stopped process cannot share this store

    @pytest.fixture
    def store_url(self) -> str:
        return "memory://"
