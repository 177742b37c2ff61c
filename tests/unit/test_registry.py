"""Store URLs name adapters by entry point: the installed ones are read once a process, and
an adapter installed later is still found."""

from __future__ import annotations

from collections.abc import Iterator
from importlib.metadata import EntryPoint

import pytest

from rill_executor import _registry
from rill_executor._registry import open_store
from rill_executor.store import MemoryStore

GROUP = "rill_executor.stores"


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[list[EntryPoint], list[str]]]:
    """The group's entry points as a list the test may extend, and each group read."""
    points = [EntryPoint("memory", "rill_executor._memory:open_memory", GROUP)]
    reads: list[str] = []

    def entry_points(*, group: str) -> list[EntryPoint]:
        reads.append(group)
        return [p for p in points if p.group == group]

    monkeypatch.setattr(_registry, "entry_points", entry_points)
    _registry._installed.cache_clear()
    yield points, reads
    _registry._installed.cache_clear()


def test_the_installed_adapters_are_read_once(
    installed: tuple[list[EntryPoint], list[str]],
) -> None:
    _, reads = installed
    for _ in range(3):
        assert isinstance(open_store("memory://"), MemoryStore)
    assert reads == [GROUP]


def test_an_adapter_installed_after_the_first_look_is_found(
    installed: tuple[list[EntryPoint], list[str]],
) -> None:
    points, _ = installed
    assert isinstance(open_store("memory://"), MemoryStore)
    points.append(EntryPoint("later", "rill_executor._memory:open_memory", GROUP))
    assert isinstance(open_store("later://"), MemoryStore)
