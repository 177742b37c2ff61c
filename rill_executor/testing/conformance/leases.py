"""Leases and clocks: heartbeats, lease_left, the store's clock (invariant 5)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from ... import InProgress, StaleAttempt
from .._driver import DrivenLedger, is_claim
from ._fixtures import KitBase

__all__ = ["LeasesAndClocks"]


class LeasesAndClocks(KitBase):
    """Part of ``StoreConformance``: the group ``leases``."""

    # -- heartbeats ------------------------------------------------------------------------

    def test_heartbeat_keeps_the_lease_live(self, ledger: DrivenLedger) -> None:
        # 3.2 s of beats past a 3-s lease: only the beats keep it, with 2.2 s to spare for
        # a loaded machine's stalls between two of them (0.25 s, then 0.8 s, were not enough)
        a = ledger.claim("k", lease=3.0)
        for _ in range(4):
            time.sleep(0.8)
            a.heartbeat()
            assert isinstance(ledger.claim("k"), InProgress)
        a.commit("done")
        assert ledger.claim("k").result() == "done"

    # -- the store's clock -------------------------------------------------------------------

    def test_the_callers_clock_does_not_judge_leases(self, ledger: DrivenLedger) -> None:
        time_machine = pytest.importorskip("time_machine")
        owner = ledger.claim("k", lease=1.0)  # live through a loaded machine's stall
        ahead = datetime.now(UTC) + timedelta(hours=5)
        with time_machine.travel(ahead, tick=True):
            assert isinstance(ledger.claim("k"), InProgress)  # cannot steal a live lease
        behind = datetime.now(UTC) - timedelta(hours=5)
        with time_machine.travel(behind, tick=True):
            time.sleep(1.2)  # real time passes; this caller's clock says it is hours earlier
            with pytest.raises(StaleAttempt) as err:
                owner.heartbeat()  # cannot keep a dead lease
            assert err.value.reason == "lease_expired"
            assert is_claim(ledger.claim("k"))

    # -- lease_left counts down ----------------------------------------------------------------

    def test_in_progress_lease_left_counts_down(self, ledger: DrivenLedger) -> None:
        ledger.claim("k", lease=3)
        time.sleep(1.0)
        busy = ledger.claim("k")
        assert isinstance(busy, InProgress)
        assert timedelta(0) < busy.lease_left <= timedelta(seconds=2.2)
