"""The kit: every group composed into ``StoreConformance``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ._opt_out import apply_opt_outs
from .claims import ClaimsAndFencing
from .history import History
from .hostile import HostileStrings
from .leases import LeasesAndClocks
from .outbox import Outbox
from .outputs import Outputs
from .purge import Purge
from .races import Races
from .replay import Replays
from .resolution import Resolution

__all__ = ["GROUPS", "StoreConformance"]

GROUPS: Mapping[str, type] = {
    "claims": ClaimsAndFencing,
    "replay": Replays,
    "history": History,
    "outbox": Outbox,
    "outputs": Outputs,
    "purge": Purge,
    "resolution": Resolution,
    "races": Races,
    "leases": LeasesAndClocks,
    "hostile": HostileStrings,
}
"""The kit's groups of tests by name: what ``skip_groups`` names."""


class StoreConformance(
    ClaimsAndFencing,
    Replays,
    History,
    Outbox,
    Outputs,
    Purge,
    Resolution,
    Races,
    LeasesAndClocks,
    HostileStrings,
):
    """Subclass in a test module and provide a ``store_url`` fixture::

        class TestMyStore(StoreConformance):
            @pytest.fixture
            def store_url(self) -> str:
                return "mystore://127.0.0.1:1234/0"

    A store that cannot keep part of the contract opts out of a group of tests
    (``GROUPS``) or of one test by name, with the reason pytest reports as its skip::

        skip_groups = {"races": "one process only"}
        skip_tests = {"test_ping_answers": "this store has no ping"}

    For a store that lives inside one process, set ``multiprocess = False`` (the race then
    runs on threads) and skip ``test_sigstopped_zombie_is_fenced`` (a stopped process
    cannot share it; ``test_paused_attempt_is_fenced_in_process`` covers the zombie).
    A store that lists jobs by scanning (Redis) sets ``exact_listing = False``: its pages
    may hold more than ``limit`` jobs and, while its keyspace is resized, repeat a job.
    A store without the optional ``ping`` skips ``test_ping_answers``.
    """

    skip_groups: ClassVar[Mapping[str, str]] = {}
    skip_tests: ClassVar[Mapping[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        apply_opt_outs(cls, GROUPS)
