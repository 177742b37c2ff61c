"""History: every attempt with its outcome, and the event log (invariants 4 and 15)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from ... import AttemptOutcome, InProgress, InvalidPayload, JobState, Replay, fingerprint_of
from ...store import MAX_EVENTS
from .._driver import DrivenLedger, is_claim
from ._fixtures import KitBase
from ._support import _stable

__all__ = ["History"]


class History(KitBase):
    """Part of ``StoreConformance``: the group ``history``."""

    # -- every attempt on the record (invariant 4) -----------------------------------------

    def test_status_reports_job_and_every_attempt(self, ledger: DrivenLedger) -> None:
        assert ledger.status("nothing-here") is None
        a = ledger.claim("k", fingerprint=fingerprint_of("in"), result_version="v2", lease=0.2)
        a.heartbeat()
        time.sleep(0.3)
        b = ledger.claim("k", fingerprint=fingerprint_of("in"), result_version="v2")
        b.fail(RuntimeError("disk full"), retryable=True)
        c = ledger.claim("k", fingerprint=fingerprint_of("in"), result_version="v2")
        c.commit({"frames": 250})
        status = ledger.status("k")
        assert status is not None
        assert (status.namespace, status.key, status.state) == (
            ledger.namespace,
            "k",
            JobState.SUCCEEDED,
        )
        assert status.result_version == "v2" and status.fingerprint == fingerprint_of("in")
        assert status.result == {"frames": 250} and status.owner is None
        assert status.retain_until is not None and status.finished_at is not None
        assert status.retain_until > status.finished_at
        assert [(x.attempt_id, x.fence, x.outcome) for x in status.attempts] == [
            (a.attempt_id, a.fence, AttemptOutcome.EXPIRED),
            (b.attempt_id, b.fence, AttemptOutcome.FAILED),
            (c.attempt_id, c.fence, AttemptOutcome.SUCCEEDED),
        ]
        assert status.attempts[1].error is not None
        assert status.attempts[1].error.message == "disk full"
        assert all(x.ended_at is not None and x.ended_at >= x.started_at for x in status.attempts)

    # -- the event log: refusals kept on the record, nothing else changed (15) -------------

    def test_an_event_is_logged_on_the_stores_clock_and_changes_nothing_else(
        self, ledger: DrivenLedger
    ) -> None:
        zombie = ledger.claim("k", lease=0.2)
        time.sleep(0.3)
        heir = ledger.claim("k")
        assert is_claim(heir)
        before = ledger.status("k")
        assert before is not None and before.events == ()
        assert ledger.record_event(
            "k",
            "token_refused",
            attempt_id=zombie.attempt_id,
            fence=zombie.fence,
            reason="superseded",
            detail="complete",
        )
        assert ledger.record_event("k", "note.operator", detail="looked at it")
        after = ledger.status("k")
        assert after is not None
        unlogged: dict[str, Any] = {
            "events": True,
            "attempts": {"__all__": {"events"}},
            "store_time": True,
            "owner": {"lease_left"},
        }
        assert after.model_dump(exclude=unlogged) == before.model_dump(exclude=unlogged)
        assert [(e.kind, e.attempt_id, e.fence, e.reason, e.detail) for e in after.events] == [
            ("token_refused", zombie.attempt_id, zombie.fence, "superseded", "complete"),
            ("note.operator", None, None, None, "looked at it"),
        ]
        first, second = after.events
        assert before.store_time <= first.at <= second.at <= after.store_time
        by_attempt = {a.attempt_id: a.events for a in after.attempts}
        assert by_attempt == {zombie.attempt_id: (first,), heir.attempt_id: ()}
        heir.commit("done")  # a later write keeps the log
        done = ledger.status("k")
        assert done is not None and done.events == after.events

    def test_an_event_for_no_job_writes_nothing(self, ledger: DrivenLedger) -> None:
        assert ledger.record_event("absent", "token_refused", reason="expired") is False
        assert ledger.status("absent") is None
        ledger.claim("k")
        before = _stable(ledger.status("k"))
        for bad in ("", "Token Refused", "x" * 65, 7):
            with pytest.raises(InvalidPayload, match="event kind"):
                ledger.record_event("k", bad)
        with pytest.raises(InvalidPayload, match="fence"):
            ledger.record_event("k", "token_refused", fence="1")
        assert _stable(ledger.status("k")) == before

    def test_the_event_log_keeps_its_first_entries_and_counts_the_rest(
        self, ledger: DrivenLedger
    ) -> None:
        ledger.claim("k")
        for n in range(MAX_EVENTS + 3):
            ledger.record_event("k", "token_refused", reason=f"r{n}")
        status = ledger.status("k")
        assert status is not None
        assert [e.reason for e in status.events] == [f"r{n}" for n in range(MAX_EVENTS)]
        assert status.events_dropped == 3
        resolved = ledger.resolve("k", "terminate", reason="stuck", actor="alice", force=True)
        assert [e.kind for e in resolved.events[-2:]] == ["token_refused", "resolved"]
        assert len(resolved.events) == MAX_EVENTS + 1
        assert resolved.events_dropped == 3
        ledger.record_event("k", "token_refused", reason="late")
        after = ledger.status("k")
        assert after is not None
        assert (after.events, after.events_dropped) == (resolved.events, 4)

    # -- what each attempt answered: its origin and its trace context ----------------------

    def test_the_attempt_history_keeps_what_each_attempt_answered(
        self, ledger: DrivenLedger
    ) -> None:
        first = {"execution_id": "ws:dag_c_1", "task_name": "t", "ts": 1, "mode": "async"}
        a = ledger.claim("k", origin=first, lease=0.2)
        status = ledger.status("k")
        assert status is not None and status.attempts[0].origin == first
        time.sleep(0.3)
        second = {**first, "ts": 2}
        b = ledger.claim("k", origin=second)
        assert is_claim(b) and b.fence == a.fence + 1
        b.commit("done")
        status = ledger.status("k")
        assert status is not None
        assert [(x.outcome, x.origin) for x in status.attempts] == [
            (AttemptOutcome.EXPIRED, first),
            (AttemptOutcome.SUCCEEDED, second),
        ]

    def test_the_attempts_trace_context_is_kept_and_answered_to_duplicates(
        self, ledger: DrivenLedger
    ) -> None:
        first = "00-" + "a1" * 16 + "-" + "b2" * 8 + "-01"
        second = "00-" + "c3" * 16 + "-" + "d4" * 8 + "-00"
        a = ledger.claim("k", trace=first, lease=1.0)  # outlives a loaded machine's next claim
        busy = ledger.claim("k", trace=second)
        assert isinstance(busy, InProgress) and busy.trace == first
        time.sleep(1.1)
        b = ledger.claim("k", trace=second)
        assert is_claim(b) and b.fence == a.fence + 1
        b.commit("done")
        replay = ledger.claim("k")
        assert isinstance(replay, Replay)
        assert (replay.trace, replay.attempt_id) == (second, b.attempt_id)
        untraced = ledger.claim("other")
        untraced.commit(1)
        again = ledger.claim("other", trace=first)
        assert isinstance(again, Replay) and again.trace is None
        status = ledger.status("k")
        assert status is not None
        assert [(x.outcome, x.trace) for x in status.attempts] == [
            (AttemptOutcome.EXPIRED, first),
            (AttemptOutcome.SUCCEEDED, second),
        ]
        with pytest.raises(InvalidPayload, match="traceparent"):
            ledger.claim("third", trace="00-abc")
        assert ledger.status("third") is None

    # -- huge error messages -------------------------------------------------------------------

    def test_huge_error_message_is_recorded_truncated(self, ledger: DrivenLedger) -> None:
        claim = ledger.claim("k")
        claim.fail(RuntimeError("x" * 300_000), retryable=False)
        replay = ledger.claim("k")
        assert isinstance(replay, Replay) and replay.error is not None
        assert len(replay.error.message) <= 5000
