"""The kit's pytest plugin, registered as the ``pytest11`` entry point ``rill_executor``.

It registers the marks the kit's tests carry, so that a project running the kit under
``--strict-markers`` collects them without declaring them itself. pytest loads it in every
run of every environment that installs the package, so it imports nothing of the kit.
"""

from __future__ import annotations

import pytest

__all__ = ["MARKERS", "pytest_configure"]

MARKERS = ("slow: rill-executor conformance kit: multi-process races and crash tests",)


def pytest_configure(config: pytest.Config) -> None:
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
