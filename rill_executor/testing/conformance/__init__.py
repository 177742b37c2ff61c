"""The store contract as tests: the invariants of docs/concepts.md ("Invariants"), sync and async.

``StoreConformance`` composes one class of tests per group of invariants (``GROUPS``):
claims and fencing, replay, history, the outbox, outputs, purge (with retention and
listing), resolution, races, leases and clocks, and hostile strings. Every test body runs
twice, through ``Ledger`` and through ``AsyncLedger`` (see ``LedgerDriver``), against a real
store opened by URL.
"""

from __future__ import annotations

from ._kit import GROUPS, StoreConformance
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

__all__ = [
    "GROUPS",
    "ClaimsAndFencing",
    "History",
    "HostileStrings",
    "LeasesAndClocks",
    "Outbox",
    "Outputs",
    "Purge",
    "Races",
    "Replays",
    "Resolution",
    "StoreConformance",
]
