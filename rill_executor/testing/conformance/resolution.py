"""Manual resolution and the drill report (invariant 16)."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest

from ... import (
    AttemptOutcome,
    InvalidPayload,
    JobFailed,
    JobState,
    Replay,
    ResolutionRefused,
    StaleAttempt,
    fingerprint_of,
    raise_for_outcome,
)
from ...reports import default_actor
from ...store import Watch
from .._driver import DrivenLedger, LedgerDriver, is_claim
from ._fixtures import KitBase
from ._support import _counting, _per_job, _stable

__all__ = ["Resolution"]


class Resolution(KitBase):
    """Part of ``StoreConformance``: the group ``resolution``."""

    # -- manual resolution: fenced, recorded with reason and actor (invariant 16) ----------

    def test_a_redo_fences_a_zombie_and_the_next_claim_runs(self, ledger: DrivenLedger) -> None:
        zombie = ledger.claim("k", fingerprint=fingerprint_of(1), lease=0.2)
        time.sleep(0.3)  # its lease ran out; its host is paused, not dead
        status = ledger.resolve("k", "redo", reason="poisoned record", actor="alice")
        assert (status.state, status.fence, status.owner) == (JobState.FAILED, 2, None)
        assert [a.outcome for a in status.attempts] == [AttemptOutcome.ABANDONED]
        (event,) = status.events
        assert (event.kind, event.detail, event.reason, event.actor, event.fence) == (
            "resolved",
            "redo",
            "poisoned record",
            "alice",
            2,
        )
        assert event.data == {
            "force": False,
            "before": {
                "state": "processing",
                "fence": 1,
                "owner_attempt": zombie.attempt_id,
                "lease_live": False,
            },
        }
        with pytest.raises(StaleAttempt) as stale:
            zombie.commit("the zombie's result")
        assert stale.value.reason == "superseded"
        assert _stable(ledger.status("k")) == _stable(status)
        heir = ledger.claim("k", fingerprint=fingerprint_of(2))  # any request runs again
        assert is_claim(heir) and heir.fence == 3
        heir.commit("done")
        done = ledger.status("k")
        assert done is not None and done.result == "done" and done.events == status.events

    def test_a_live_lease_is_refused_unless_forced(self, ledger: DrivenLedger) -> None:
        owner = ledger.claim("k", lease=30)
        before = _stable(ledger.status("k"))
        with pytest.raises(ResolutionRefused, match="live lease") as refused:
            ledger.resolve("k", "terminate", reason="stuck")
        assert refused.value.reason == "live_lease"
        assert _stable(ledger.status("k")) == before
        status = ledger.resolve("k", "terminate", reason="stuck", force=True)
        assert status.state is JobState.FAILED and status.error is not None
        assert status.error.retryable is False and "stuck" in status.error.message
        assert [a.outcome for a in status.attempts] == [AttemptOutcome.FENCED]
        (event,) = status.events
        assert event.actor == default_actor() and event.data is not None
        assert event.data["force"] is True and event.data["before"]["lease_live"] is True
        with pytest.raises(StaleAttempt):
            owner.heartbeat()
        with pytest.raises(JobFailed, match="stuck"):
            raise_for_outcome(ledger.claim("k"))

    def test_reuse_needs_a_result_and_answers_waiting_dispatches(
        self, ledger: DrivenLedger
    ) -> None:
        ledger.claim("k", watch=Watch("task", {"url": "u1"}), lease=0.2)
        time.sleep(0.3)
        before = _stable(ledger.status("k"))
        with pytest.raises(ResolutionRefused, match="no committed result") as refused:
            ledger.resolve("k", "reuse", reason="done by hand")
        assert refused.value.reason == "no_result"
        assert _stable(ledger.status("k")) == before
        status = ledger.resolve("k", "reuse", reason="done by hand", result={"uri": "s3://x"})
        assert status.state is JobState.SUCCEEDED and status.result == {"uri": "s3://x"}
        assert [(n.watch, n.fence, n.state) for n in status.notices] == [
            ("task", 2, JobState.SUCCEEDED)
        ]
        replay = ledger.claim("k")
        assert isinstance(replay, Replay) and replay.result() == {"uri": "s3://x"}
        again = ledger.resolve("k", "reuse", reason="confirmed")  # its committed result
        assert again.fence == 3 and again.result == {"uri": "s3://x"}
        assert [e.reason for e in again.events] == ["done by hand", "confirmed"]

    def test_a_resolution_that_cannot_apply_changes_nothing(self, ledger: DrivenLedger) -> None:
        with pytest.raises(ResolutionRefused, match="no job") as refused:
            ledger.resolve("absent", "redo", reason="r")
        assert refused.value.reason == "missing" and ledger.status("absent") is None
        ledger.claim("k", lease=0.2)
        time.sleep(0.3)
        before = _stable(ledger.status("k"))
        bad: list[dict[str, Any]] = [
            {"action": "delete", "reason": "r"},
            {"action": "redo", "reason": " "},
            {"action": "redo", "reason": "r", "actor": ""},
            {"action": "redo", "reason": "r", "result": 1},
        ]
        for options in bad:
            with pytest.raises(InvalidPayload):
                ledger.resolve("k", **options)
        assert _stable(ledger.status("k")) == before

    # -- the drill report ------------------------------------------------------------------

    def test_the_drill_report_of_a_healthy_namespace_is_clean_and_counts_the_recovery(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        ledger = driver.ledger(namespace, lease=30)
        ledger.claim("done").commit("r")
        ledger.resolve("done", "redo", reason="re-encode")  # a second result, on the record
        ledger.claim("done").commit("r3")
        zombie = ledger.claim("taken", lease=0.2)
        ledger.claim("dangling", lease=0.2)
        ledger.claim("stuck", lease=0.2)
        ledger.claim("watched", watch=Watch("task", {"url": "u"})).commit("x")
        time.sleep(0.3)
        ledger.claim("taken").commit("r2")
        ledger.resolve("stuck", "terminate", reason="source deleted")
        ledger.record_event(
            "taken", "token_refused", attempt_id=zombie.attempt_id, fence=1, reason="superseded"
        )
        report = ledger.drill(page=2)
        assert report.ok and report.broken == ()
        assert (report.jobs, report.states) == (5, {"failed": 1, "processing": 1, "succeeded": 3})
        assert (report.dangling, report.dangling_count) == (("dangling",), 1)
        assert (report.attempts, report.max_attempts, report.takeovers) == (7, 2, 1)
        assert (report.refused_writes, report.resolutions) == (1, 2)
        assert (report.notices_pending, report.notices_dropped) == (1, 0)
        assert report.orphan_outputs is None  # no output store

    def test_the_drill_reads_a_page_of_whole_jobs_a_store_call(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        calls: Counter[str] = Counter()
        ledger = driver.ledger(namespace, lease=30, wrap=lambda store: _counting(store, calls))
        for i in range(30):
            ledger.claim(f"done-{i}").commit(i)
        ledger.claim("failed").fail(RuntimeError("disk full"), retryable=False)
        ledger.claim("dangling", lease=0.2)
        ledger.claim("live")
        time.sleep(0.3)
        calls.clear()
        report = ledger.drill(page=10)
        reads = sum(calls.values())
        assert reads <= 33 // 10 + 1, f"33 jobs in pages of 10 took {reads} reads: {calls}"
        assert (report.jobs, report.dangling, report.dangling_count) == (33, ("dangling",), 1)
        assert report.states == {"failed": 1, "processing": 2, "succeeded": 30}
        one_by_one = driver.ledger(namespace, lease=30, wrap=_per_job).drill(page=10)
        assert report.model_dump(exclude={"store_time"}) == one_by_one.model_dump(
            exclude={"store_time"}
        )  # the same report as reading each job alone
