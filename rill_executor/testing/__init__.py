"""Test support for rill-executor: the store conformance kit.

An adapter opts in with one test module::

    import pytest
    from rill_executor.testing import StoreConformance

    class TestMyStore(StoreConformance):
        @pytest.fixture
        def store_url(self) -> str:
            return "mystore://127.0.0.1:1234/0"

Every test runs through ``Ledger`` and ``AsyncLedger``. The kit needs pytest, hypothesis
and time-machine (``pip install 'rill-executor[testing]'``).
"""

from ._conformance import StoreConformance
from ._driver import LedgerDriver, Portal, is_claim

__all__ = ["LedgerDriver", "Portal", "StoreConformance", "is_claim"]
