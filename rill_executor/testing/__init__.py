"""Test support for rill-executor: the store conformance kit.

An adapter opts in with one test module::

    import pytest
    from rill_executor.testing import StoreConformance

    class TestMyStore(StoreConformance):
        @pytest.fixture
        def store_url(self) -> str:
            return "mystore://127.0.0.1:1234/0"

Every test runs through ``Ledger`` and ``AsyncLedger``. The tests come in groups, one module
each in ``rill_executor.testing.conformance``; a store opts out of a group or of one test by
name with a reason (``skip_groups``, ``skip_tests``), reported as a skip. The kit needs
pytest, hypothesis and time-machine (``pip install 'rill-executor[testing]'``). The package
installs a pytest plugin that registers the kit's marks (``slow``), so the kit collects
under ``--strict-markers`` in any project.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._clock import VirtualClock
    from ._driver import LedgerDriver, Portal, is_claim
    from ._offset import with_clock_offset, with_frozen_clock
    from .conformance import StoreConformance

__all__ = [
    "LedgerDriver",
    "Portal",
    "StoreConformance",
    "VirtualClock",
    "is_claim",
    "with_clock_offset",
    "with_frozen_clock",
]

# Imported on first use: the package is the parent of the pytest plugin (``_plugin``) that
# every pytest run loads, and the kit pulls in hypothesis and the whole library.
_HOMES = {
    "LedgerDriver": "._driver",
    "Portal": "._driver",
    "StoreConformance": ".conformance",
    "VirtualClock": "._clock",
    "is_claim": "._driver",
    "with_clock_offset": "._offset",
    "with_frozen_clock": "._offset",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name], __name__), name)
    globals()[name] = value
    return value
