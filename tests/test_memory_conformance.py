from typing import ClassVar

import pytest

from rill_executor.testing import StoreConformance


class TestMemoryStore(StoreConformance):
    multiprocess = False
    skip_tests: ClassVar = {
        "test_sigstopped_zombie_is_fenced": "the memory store lives in one process: a stopped"
        " child cannot share it (test_paused_attempt_is_fenced_in_process covers the zombie)"
    }

    @pytest.fixture
    def store_url(self) -> str:
        return "memory://"
